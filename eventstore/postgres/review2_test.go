package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// review2Streams makes a store with n streams of one event each.
func review2Streams(t *testing.T, n int) *postgres.Store {
	t.Helper()
	// Not newStore: its clean-up Close would wait on a hung Close.
	schema := server.NewSchema("review2")
	ctx := context.Background()
	s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = s.Close(); close(done) }()
		select {
		case <-done:
			dropSchema(t, schema)
		case <-time.After(2 * time.Second): // leaked: the test said why
		}
	})
	for i := 0; i < n; i += 100 {
		for j := i; j < min(i+100, n); j++ {
			_, err := s.Append(ctx, fmt.Sprintf("s-%05d", j), eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
			require.NoError(t, err)
		}
	}
	return s
}

// Broken promise (Store.Close: a store closed under a running call makes
// it end with ErrClosed, closedOr; the listing was paged before and
// checked checkOpen per page): Catalog.Streams now holds a pooled
// connection while the caller ranges, and Close closes the pool, which
// waits for every acquired connection. A caller that closes the store
// from its loop body (a shutdown handler run inline, a "stop after the
// first hit" helper) hangs forever; expected: Close returns and the
// listing ends with ErrClosed.
func TestReview2StreamsCloseInsideLoopHangs(t *testing.T) {
	s := review2Streams(t, 300)
	done := make(chan error, 1)
	go func() {
		var last error
		n := 0
		for _, err := range s.Streams(context.Background(), "", "") {
			if err != nil {
				last = err
				break
			}
			n++
			if n == 1 {
				_ = s.Close()
			}
		}
		done <- last
	}()
	select {
	case err := <-done:
		assert.True(t, err == nil || errors.Is(err, eventstore.ErrClosed), "listing after Close: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close called while ranging over Streams did not return in 10s: the pool waits for the listing's connection")
	}
}

// Broken promise (as above): Close from another goroutine while a caller
// is ranging blocked until the caller stopped: expected Close to return
// promptly, and no later read of the store to succeed.
func TestReview2StreamsCloseFromAnotherGoroutine(t *testing.T) {
	s := review2Streams(t, 300)
	closed := make(chan struct{})
	after := 0
	var last error
	n := 0
	for _, err := range s.Streams(context.Background(), "", "") {
		if err != nil {
			last = err
			break
		}
		n++
		if n == 1 {
			go func() { _ = s.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(3 * time.Second):
			}
		}
		select {
		case <-closed:
		default:
			if n > 1 {
				after++
			}
		}
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close never returned")
	}
	assert.Zero(t, after, "streams yielded while Close waited")
	// The listing reads a page at a time and holds nothing of the store
	// while the caller ranges: the page read before Close is the
	// caller's, and a read after it fails with ErrClosed. 300 streams are
	// one page, so the listing ends with that page.
	if last != nil {
		assert.ErrorIs(t, last, eventstore.ErrClosed, "(%d streams listed)", n)
	}
}

// Held: breaking early and cancelling ctx mid-listing release the
// connection (a later Close does not hang) and end with ctx's error.
func TestReview2StreamsBreakAndCancel(t *testing.T) {
	s := review2Streams(t, 300)
	for range 20 { // more than the pool's connections
		for _, err := range s.Streams(context.Background(), "", "") {
			require.NoError(t, err)
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	n := 0
	for _, err := range s.Streams(ctx, "", "") {
		if err != nil {
			last = err
			break
		}
		if n++; n == 1 {
			cancel()
		}
	}
	if n < 300 {
		assert.ErrorIs(t, last, context.Canceled, "after %d", n)
	}
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung after early breaks: a connection leaked")
	}
}
