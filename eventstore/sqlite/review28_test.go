package sqlite_test

// Review 28: the SQLite store's slab-cut event data, literal page LIMITs,
// the channel pool of event readers and stream names taken from the query.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

func r28Data(i int) []byte {
	// Sizes around the slab's bounds: 0, small, 256, 257, and near 4 KB.
	sizes := []int{0, 1, 7, 255, 256, 257, 1000, 4095, 4096, 33}
	n := sizes[i%len(sizes)]
	return bytes.Repeat([]byte{byte('a' + i%26)}, n)
}

func r28Append(t *testing.T, s eventstore.Store, stream string, from, n int) {
	t.Helper()
	var es []eventstore.EventData
	for i := from; i < from+n; i++ {
		es = append(es, eventstore.EventData{ID: eventstore.NewEventID(), Type: "t", Data: r28Data(i)})
	}
	exp := eventstore.NoStream
	if from > 0 {
		exp = eventstore.Exact(uint64(from - 1))
	}
	if _, err := s.Append(context.Background(), stream, exp, es...); err != nil {
		t.Fatal(err)
	}
}

// Every event's data is capped at its length, whatever read returned it:
// appending to one never writes into another, in the same page, in a later
// page cut from the same slab, or in a read made after.
func TestReview28SlabDataIsCappedAndApart(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, sqlite.Options{})
	r28Append(t, s, "s", 0, 300)
	r28Append(t, s, "t", 0, 300)
	var kept []eventstore.Event
	check := func(what string, e eventstore.Event) {
		if cap(e.Data) != len(e.Data) {
			t.Fatalf("%s: %s v%d data has cap %d, len %d", what, e.StreamID, e.Version, cap(e.Data), len(e.Data))
		}
		if !bytes.Equal(e.Data, r28Data(int(e.Version))) {
			t.Fatalf("%s: %s v%d reads %d bytes %.8q", what, e.StreamID, e.Version, len(e.Data), e.Data)
		}
		// Fill the whole capacity, and append past it.
		for j := range e.Data {
			e.Data[j] = '#'
		}
		_ = append(e.Data, "OVERWRITE"...)
		kept = append(kept, eventstore.Event{StreamID: e.StreamID, Version: e.Version, EventData: eventstore.EventData{Data: e.Data}})
	}
	for range 3 {
		for _, opts := range []eventstore.ReadOptions{eventstore.Forward(0), eventstore.Backward(eventstore.End), {Limit: 3}, {From: 10, Limit: 600}} {
			for _, st := range []string{"s", "t"} {
				for e, err := range s.ReadStream(ctx, st, opts) {
					if err != nil {
						t.Fatal(err)
					}
					if e.StreamID != st {
						t.Fatalf("read of %s yields an event of %q", st, e.StreamID)
					}
					check("ReadStream", e)
				}
			}
		}
		for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			check("ReadAll", e)
		}
	}
	// What readers were given was filled with '#' by them, and nothing else.
	for _, e := range kept {
		for _, c := range e.Data {
			if c != '#' {
				t.Fatalf("%s v%d: data kept by a reader was changed under it: %.16q", e.StreamID, e.Version, e.Data)
			}
		}
	}
}

// Reads with limits around and above the 512 written into the page
// queries, forward and backward, from every kind of place: no event is
// skipped or repeated.
func TestReview28LimitsAroundTheLiteralLimit(t *testing.T) {
	race.Outside(t)
	ctx := context.Background()
	s := openTemp(t, sqlite.Options{})
	const n = 1100
	for from := 0; from < n; from += 275 {
		r28Append(t, s, "s", from, 275)
	}
	limits := []int{0, 1, 2, 3, 255, 511, 512, 513, 767, 1023, 1024, 1025, 1099, 1100, 1101, 5000}
	for _, lim := range limits {
		for _, from := range []uint64{0, 1, 511, 512, 513, 1099, 1100} {
			want := n - int(from)
			if lim > 0 {
				want = min(want, lim)
			}
			got := 0
			for e, err := range s.ReadStream(ctx, "s", eventstore.ReadOptions{From: from, Limit: lim}) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Version != from+uint64(got) {
					t.Fatalf("forward from %d limit %d: event %d is v%d", from, lim, got, e.Version)
				}
				got++
			}
			if got != max(want, 0) {
				t.Fatalf("forward from %d limit %d: %d events, want %d", from, lim, got, want)
			}
		}
		for _, from := range []uint64{0, 511, 512, 513, 1024, 1099, 1100, eventstore.End} {
			top := min(from, n-1)
			want := int(top) + 1
			if lim > 0 {
				want = min(want, lim)
			}
			got := 0
			for e, err := range s.ReadStream(ctx, "s", eventstore.ReadOptions{From: from, Backward: true, Limit: lim}) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Version != top-uint64(got) {
					t.Fatalf("backward from %d limit %d: event %d is v%d", from, lim, got, e.Version)
				}
				got++
			}
			if got != want {
				t.Fatalf("backward from %d limit %d: %d events, want %d", from, lim, got, want)
			}
		}
	}
	// ReadAll and filtered ReadAll across several pages.
	r28Append(t, s, "u", 0, 600)
	for _, f := range []eventstore.Filter{{}, {StreamPrefixes: []string{"u"}}, {Types: []string{"t"}}, {Types: []string{"t", "x"}}, {StreamPrefixes: []string{"s", "u"}}} {
		var last eventstore.Position
		count := 0
		for e, err := range s.ReadAll(ctx, eventstore.Start, f) {
			if err != nil {
				t.Fatal(err)
			}
			if !last.Before(e.Position) {
				t.Fatalf("filter %v: %v after %v", f, e.Position, last)
			}
			last = e.Position
			count++
		}
		want := 1700
		if len(f.StreamPrefixes) == 1 {
			want = 600
		}
		if count != want {
			t.Fatalf("filter %v: %d events, want %d", f, count, want)
		}
	}
}

// Closing the store while reads are running and waiting for one reader
// connection ends them with ErrClosed or lets them finish, and never hangs;
// a canceled context frees a read waiting for a connection.
func TestReview28CloseAndCancelWhileReading(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, t.TempDir()+"/e.db", sqlite.Options{MaxReaders: 1})
	if err != nil {
		t.Fatal(err)
	}
	r28Append(t, s, "s", 0, 1200)
	// A canceled context: the read ends with its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range s.ReadStream(cctx, "s", eventstore.Forward(0)) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled read: %v", err)
		}
		break
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for r := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, time.Duration(r)*time.Millisecond)
			defer cancel()
			for range 20 {
				for _, err := range s.ReadStream(rctx, "s", eventstore.Forward(0)) {
					if err != nil {
						if !errors.Is(err, eventstore.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
							errs <- fmt.Errorf("reader %d: %w", r, err)
						}
						return
					}
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs while reads run")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("reads hang after Close")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, err := range s.ReadStream(ctx, "s", eventstore.Forward(0)) {
		if !errors.Is(err, eventstore.ErrClosed) {
			t.Fatalf("read after Close: %v", err)
		}
		break
	}
}

// Stream names that differ only in case, in Unicode normalization or by
// a trailing byte are different streams: a read of one never yields the
// other's events under its name.
func TestReview28StreamNamesFromTheQuery(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, sqlite.Options{})
	names := []string{"Order-1", "order-1", "order-1 ", "caf\u00e9", "cafe\u0301", "order-10"}
	for i, n := range names {
		r28Append(t, s, n, 0, i+1)
	}
	for i, n := range names {
		count := 0
		for e, err := range s.ReadStream(ctx, n, eventstore.Forward(0)) {
			if err != nil {
				t.Fatal(err)
			}
			if e.StreamID != n {
				t.Fatalf("read of %q yields an event of %q", n, e.StreamID)
			}
			count++
		}
		if count != i+1 {
			t.Fatalf("%q holds %d events, want %d", n, count, i+1)
		}
	}
}
