package kurrentdb

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLowestPages: passes of lowest over the same names, each after the
// last one's highest, list every name above the first after, once, in
// order, holding at most 2n at a time.
func TestLowestPages(t *testing.T) {
	var log []string // names in log order, repeated as streams' events are
	for i := range 50 {
		log = append(log, fmt.Sprintf("s%02d", (i*37)%23), fmt.Sprintf("s%02d", (i*11)%23))
	}
	var listed []string
	after := "s03"
	for {
		page := newLowest[int](after, 4)
		for i, name := range log {
			page.put(name, i)
			assert.Less(t, len(page.items), 8)
		}
		names, full := page.sorted()
		for _, name := range names {
			last := -1
			for i, n := range log {
				if n == name {
					last = i
				}
			}
			assert.Equal(t, last, page.items[name], "the item of %s is its last put", name)
		}
		listed = append(listed, names...)
		if !full {
			break
		}
		after = names[len(names)-1]
	}
	var want []string
	for i := 4; i < 23; i++ {
		want = append(want, fmt.Sprintf("s%02d", i))
	}
	assert.Equal(t, want, listed)
}
