package storetest

import (
	"context"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
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
func testHead(t testing.TB, s eventstore.Store) {
	h, ok := s.(headReader)
	if !ok {
		t.Log("the store tells no head (it is not a projection.HeadReader); nothing to check")
		return
	}
	ctx := context.Background()
	n := newNames(t)
	before, err := h.Head(ctx)
	check.NoError(t, err)
	first := mustAppend(t, s, n.stream("a"), eventstore.NoStream, event("x", "1"), event("x", "2"))
	check.True(t, !first.Position.Before(before), "an append lands at or after the head read before it")
	head, err := h.Head(ctx)
	check.NoError(t, err)
	check.True(t, !head.Before(first.Position), "the head is at or after the last append's position")
	second := mustAppend(t, s, n.stream("b"), eventstore.NoStream, event("x", "3"))
	head, err = h.Head(ctx)
	check.NoError(t, err)
	check.True(t, !head.Before(second.Position))
	var last eventstore.Position
	for ev, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		check.NoError(t, err)
		last = ev.Position
	}
	check.Equal(t, head, last, "with no append running, the head is the newest event ReadAll yields")
	check.NoError(t, s.Close())
	_, err = h.Head(ctx)
	check.ErrorIs(t, err, eventstore.ErrClosed)
}
