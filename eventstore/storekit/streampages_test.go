package storekit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// fakeStream is a stream of n events whose data names the read that made
// them, read a page at a time into the buffer ReadStreamPagesInto lends.
func fakeStream(n int, read string, lent *[]int) storekit.StreamPageAppender {
	return func(_ context.Context, dst []eventstore.Event, stream string, from uint64, _ bool, limit int) ([]eventstore.Event, error) {
		*lent = append(*lent, cap(dst))
		for v := from; v < uint64(n) && len(dst) < limit; v++ {
			dst = append(dst, eventstore.Event{StreamID: stream, Version: v,
				EventData: eventstore.EventData{Type: "t", Data: fmt.Appendf(nil, "%s-%d", read, v)}})
		}
		return dst, nil
	}
}

// TestReadStreamPagesIntoLendsAndReusesPages: the events a consumer kept
// from one read are its own (copies), whatever later reads put in the page
// buffer, which goes back to the pool and is lent again.
func TestReadStreamPagesIntoLendsAndReusesPages(t *testing.T) {
	ctx := context.Background()
	var kept []eventstore.Event
	var lent []int
	for e, err := range storekit.ReadStreamPagesInto(ctx, "s-1", eventstore.ReadOptions{}, fakeStream(25, "first", &lent), 10) {
		require.NoError(t, err)
		kept = append(kept, e)
	}
	require.Len(t, kept, 25)
	require.Len(t, lent, 3, "three pages of 10")
	require.Equal(t, lent[1], lent[2], "later pages are read into the first's buffer")
	require.GreaterOrEqual(t, lent[1], 10)

	reused := false
	for range 20 { // sync.Pool may drop a buffer (it does, at random, under -race): try a few reads
		lent = lent[:0]
		for e, err := range storekit.ReadStreamPagesInto(ctx, "s-1", eventstore.ReadOptions{}, fakeStream(25, "later", &lent), 10) {
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("later-%d", e.Version), string(e.Data))
		}
		reused = reused || lent[0] >= 10
	}
	require.True(t, reused, "a later read is lent a buffer an earlier one made")
	for i, e := range kept {
		require.Equal(t, uint64(i), e.Version)
		require.Equal(t, fmt.Sprintf("first-%d", i), string(e.Data), "kept events are untouched by later reads")
	}
}

// TestReadStreamPagesLendsNothing: a StreamPageReader's pages are its own,
// and ReadStreamPages never reuses them.
func TestReadStreamPagesLendsNothing(t *testing.T) {
	var pages [][]eventstore.Event
	read := func(_ context.Context, stream string, from uint64, _ bool, limit int) ([]eventstore.Event, error) {
		var page []eventstore.Event
		for v := from; v < 15 && len(page) < limit; v++ {
			page = append(page, eventstore.Event{StreamID: stream, Version: v})
		}
		pages = append(pages, page)
		return page, nil
	}
	for range 3 {
		n := 0
		for _, err := range storekit.ReadStreamPages(context.Background(), "s-1", eventstore.ReadOptions{}, read, 10) {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, 15, n)
	}
	for _, page := range pages {
		for i, e := range page {
			require.Equal(t, "s-1", e.StreamID, "page %v event %d was cleared or reused", page, i)
		}
	}
}
