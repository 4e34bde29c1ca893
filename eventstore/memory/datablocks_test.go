package memory

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Payloads are packed into blocks that grow from firstDataBlock to
// dataBlock; each copy is capped at its length, and one of largeData or
// more has memory of its own.
func TestDataBlocksPackCopiesAndCapThem(t *testing.T) {
	var b dataBlocks
	empty := b.copy([]byte{})
	require.NotNil(t, empty, "an empty payload stays non-nil")
	assert.Empty(t, empty)
	assert.Equal(t, firstDataBlock, cap(b.block), "a small store starts with a small block")

	a := b.copy([]byte("abc"))
	c := b.copy([]byte("de"))
	assert.Equal(t, "abc", string(a))
	assert.Len(t, a, cap(a), "a copy is capped at its length")
	_ = append(a, 'X')
	assert.Equal(t, "de", string(c), "appending to one copy must not reach the next")
	assert.Same(t, &b.block[0], &a[0], "small payloads share a block")

	// Filling blocks makes bigger ones, up to dataBlock.
	caps := map[int]bool{}
	for range 2 * dataBlock / 100 {
		b.copy(bytes.Repeat([]byte{1}, 100))
		caps[cap(b.block)] = true
	}
	assert.True(t, caps[dataBlock], "blocks grow to dataBlock: %v", caps)
	for c := range caps {
		assert.LessOrEqual(t, c, dataBlock)
	}

	big := bytes.Repeat([]byte{2}, largeData)
	got := b.copy(big)
	assert.Equal(t, big, got)
	assert.Equal(t, largeData, cap(got), "a large payload has memory of its own")
	assert.NotSame(t, &big[0], &got[0])
}
