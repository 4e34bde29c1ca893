package clip

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"a\x00b"`, Quote("a\x00b"))
	short := strings.Repeat("x", Max)
	assert.Equal(t, `"`+short+`"`, Quote(short))
	long := strings.Repeat("y", 4<<20)
	q := Quote(long)
	assert.Less(t, len(q), 2*Max)
	assert.Contains(t, q, "(4194304 bytes)")
	// A cut never splits a rune.
	runes := strings.Repeat("é", Max)
	assert.NotContains(t, Quote(runes), `\x`)
}
