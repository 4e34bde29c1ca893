package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// headReader is the optional method that tells a consumer how far it has
// to read (projection.HeadReader).
type headReader interface {
	Head(ctx context.Context) (eventstore.Position, error)
}

// testHead checks a store that tells its head: the position of the newest
// event, at or after every append's position, and never past what ReadAll
// yields. The suite runs on shared stores too, so an empty store's head is
// not asserted to be Start.
func testHead(t *testing.T, s eventstore.Store) {
	h, ok := s.(headReader)
	if !ok {
		t.Log("the store tells no head (it is not a projection.HeadReader); nothing to check")
		return
	}
	ctx := context.Background()
	n := newNames(t)
	before, err := h.Head(ctx)
	require.NoError(t, err)
	first := mustAppend(t, s, n.stream("a"), eventstore.NoStream, event("x", "1"), event("x", "2"))
	assert.False(t, first.Position.Before(before), "an append lands at or after the head read before it")
	head, err := h.Head(ctx)
	require.NoError(t, err)
	assert.False(t, head.Before(first.Position), "the head is at or after the last append's position")
	second := mustAppend(t, s, n.stream("b"), eventstore.NoStream, event("x", "3"))
	head, err = h.Head(ctx)
	require.NoError(t, err)
	assert.False(t, head.Before(second.Position))
	var last eventstore.Position
	for ev, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		last = ev.Position
	}
	assert.Equal(t, last, head, "with no append running, the head is the newest event ReadAll yields")
	require.NoError(t, s.Close())
	_, err = h.Head(ctx)
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}
