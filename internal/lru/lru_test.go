package lru

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// GetOrAdd adds once per missing key, however many callers race for it,
// counts as a use, and keeps the cache within its size.
func TestGetOrAdd(t *testing.T) {
	c := New[*int](2)
	var adds int
	var mu sync.Mutex
	add := func() *int {
		mu.Lock()
		defer mu.Unlock()
		adds++
		return new(int)
	}
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() { got[i] = c.GetOrAdd("a", add) })
	}
	wg.Wait()
	assert.Equal(t, 1, adds, "one value for one key")
	for _, v := range got {
		assert.Same(t, got[0], v)
	}
	c.GetOrAdd("b", add)
	c.GetOrAdd("a", add) // a is now the most recently used
	c.GetOrAdd("c", add) // b goes
	_, ok := c.Get("b")
	assert.False(t, ok)
	v, ok := c.Get("a")
	assert.True(t, ok)
	assert.Same(t, got[0], v)
	assert.Equal(t, 2, c.Len())

	var none *Cache[*int]
	assert.NotNil(t, none.GetOrAdd("a", add), "a nil cache hands out add's value")
	assert.Equal(t, 0, none.Len())
}
