package storekit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// TestReviewS2bFailedReadLeavesNothingInThePool: ReadStreamPagesInto takes
// the lent buffer back "cleared (no event's data stays alive in the
// pool)". A reader that fails after it appended part of a page to dst (the
// PostgreSQL store does: rows.Err after some rows, a cancelled context in
// the middle of a page) returns nil with its error; the events it wrote
// into the buffer's memory are past what giveBack clears, and stay in the
// pool until some later read overwrites them.
func TestReviewS2bFailedReadLeavesNothingInThePool(t *testing.T) {
	ctx := context.Background()
	failure := errors.New("mid-page failure")
	secret := []byte("secret payload of a failed read")
	// A first successful read with a one-event page makes the buffer, so
	// that used stays small; the failing read then fills it further.
	leftovers := 0
	for round := range 200 {
		pages := 0
		failing := func(ctx context.Context, dst []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
			pages++
			if pages == 1 {
				dst = slices.Grow(dst, 16) // a page buffer of some capacity, as a reader's first page makes
				dst = append(dst, eventstore.Event{StreamID: stream, Version: from, EventData: eventstore.EventData{Type: "t", Data: []byte("{}")}})
				return dst, nil // one event, a full page of 1
			}
			for v := range 8 {
				dst = append(dst, eventstore.Event{StreamID: stream, Version: from + uint64(v), EventData: eventstore.EventData{Type: "t", Data: secret}})
			}
			return nil, failure
		}
		var err error
		for _, e := range storekit.ReadStreamPagesInto(ctx, "s-1", eventstore.ReadOptions{}, failing, 1) {
			if e != nil {
				err = e
			}
		}
		require.ErrorIs(t, err, failure)

		// The next read looks at the memory it is lent.
		inspect := func(ctx context.Context, dst []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
			for _, e := range dst[:cap(dst)] {
				if e.Data != nil || e.StreamID != "" {
					leftovers++
					break
				}
			}
			return dst, nil
		}
		for range storekit.ReadStreamPagesInto(ctx, "s-1", eventstore.ReadOptions{}, inspect, 1) {
		}
		_ = round
	}
	require.Zero(t, leftovers, fmt.Sprintf("in %d of 200 rounds the buffer lent to a read still held the events a failed read had written into it", leftovers))
}

// TestReviewS2bUnlentReaderGetsNoBuffer: ReadStreamPages never reuses (or
// lends) its reader's pages.
func TestReviewS2bUnlentReaderGetsNoBuffer(t *testing.T) {
	ctx := context.Background()
	var pages [][]eventstore.Event
	read := func(ctx context.Context, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
		if from >= 5 {
			return nil, nil
		}
		page := make([]eventstore.Event, 0, limit)
		for v := from; v < min(from+uint64(limit), 5); v++ {
			page = append(page, eventstore.Event{StreamID: stream, Version: v, EventData: eventstore.EventData{Type: "t", Data: []byte{byte(v)}}})
		}
		pages = append(pages, page)
		return page, nil
	}
	var got []uint64
	for e, err := range storekit.ReadStreamPages(ctx, "s-1", eventstore.ReadOptions{}, read, 2) {
		require.NoError(t, err)
		got = append(got, e.Version)
	}
	require.Equal(t, []uint64{0, 1, 2, 3, 4}, got)
	for i, p := range pages {
		for j, e := range p {
			require.Equal(t, []byte{byte(e.Version)}, e.Data, "page %d event %d: the reader's page was cleared or reused", i, j)
		}
	}
}
