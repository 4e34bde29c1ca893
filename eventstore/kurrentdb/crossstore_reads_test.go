package kurrentdb_test

// Reads and subscriptions resumed at every position and across a server's
// restart, a store closed under load, and what a store leaves behind: the
// cross-store regression tests that crossstore_test.go introduces.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// ---------------------------------------------------------------------------
// Reads and subscriptions

// ReadAll and Subscribe resume exactly after every position, inside
// multi-event appends too (commit shared, prepares growing), between
// system events and the store's own state records, with and without a
// filter.
func TestCrossStoreResumeAfterEveryPosition(t *testing.T) {
	srv := testserver.New(t)
	s := rvOpen(t, srv, kurrentdb.Options{})
	cli := rawClient(t, srv)
	ctx := context.Background()
	for i := range 12 {
		_, err := s.Append(ctx, fmt.Sprintf("res-%d", i%3), eventstore.Any, rvEvents(1+i%4, "")...)
		require.NoError(t, err)
		if i%4 == 0 {
			require.NoError(t, s.SaveSnapshot(ctx, storekit.Snapshot{Stream: "res-0", Version: 0, Type: "snap", Data: []byte(`{}`)}))
			_, err = cli.AppendToStream(ctx, "$sys-noise", esdb.AppendToStreamOptions{},
				esdb.EventData{EventType: "$noise", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)})
			require.NoError(t, err)
			_, err = cli.AppendToStream(ctx, "user-noise", esdb.AppendToStreamOptions{},
				esdb.EventData{EventType: "$typed-noise", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)})
			require.NoError(t, err)
		}
	}
	for _, f := range []eventstore.Filter{{}, {StreamPrefixes: []string{"res-1"}}, {Types: []string{"t"}}} {
		all := rvAll(t, s, eventstore.Start, f)
		require.NotEmpty(t, all)
		for _, e := range all {
			require.False(t, strings.HasPrefix(e.StreamID, "$") || strings.HasPrefix(e.Type, "$") || strings.HasPrefix(e.StreamID, kurrentdb.StatePrefix), "leak: %s %s", e.StreamID, e.Type)
		}
		for i := range all {
			if i > 0 {
				require.True(t, all[i-1].Position.Before(all[i].Position))
			}
			tail := rvAll(t, s, all[i].Position, f)
			require.Equal(t, len(all)-i-1, len(tail), "after %s", all[i].Position)
			for j := range tail {
				require.Equal(t, all[i+1+j].ID, tail[j].ID)
			}
			// Subscribe from there reads the same tail.
			sctx, cancel := context.WithCancel(ctx)
			got := 0
			if len(tail) > 0 {
				for e, err := range s.Subscribe(sctx, all[i].Position, f) {
					require.NoError(t, err)
					require.Equal(t, tail[got].ID, e.ID)
					if got++; got == len(tail) {
						break
					}
				}
			}
			cancel()
		}
	}
	// Positions between events: after a position one past, and one before.
	all := rvAll(t, s, eventstore.Start, eventstore.Filter{})
	for i := 1; i < len(all); i++ {
		p := all[i].Position
		before := eventstore.Position{Major: p.Major, Minor: p.Minor - 1}
		if all[i-1].Position.Before(before) {
			tail := rvAll(t, s, before, eventstore.Filter{})
			require.NotEmpty(t, tail)
			require.Equal(t, all[i].ID, tail[0].ID, "after just before %s", p)
		}
	}
	// Head is the last event of Cairn's, whatever came after.
	h, err := s.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-1].Position, h)
}

// A subscriber across dropped subscriptions and a server restart keeps
// every event once, in order; appends by another store wake it.
func TestCrossStoreSubscribeAcrossRestart(t *testing.T) {
	srv := testserver.New(t)
	s := rvOpen(t, srv, kurrentdb.Options{CallTimeout: time.Second})
	w := rvOpen(t, srv, kurrentdb.Options{CallTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const total = 60
	got := make(chan eventstore.Event, total*2)
	errc := make(chan error, 1)
	go func() {
		for e, err := range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"rs-"}}) {
			if err != nil {
				errc <- err
				return
			}
			got <- e
		}
	}()
	for i := range total / 2 {
		_, err := rvRetry(t, func() (eventstore.AppendResult, error) {
			return w.Append(ctx, "rs-a", eventstore.Any, eventstore.EventData{ID: uuid.NewSHA1(uuid.Nil, []byte(fmt.Sprint(i))), Type: "x", Data: []byte(fmt.Sprint(2 * i))},
				eventstore.EventData{ID: uuid.NewSHA1(uuid.Nil, []byte(fmt.Sprint(i, "b"))), Type: "x", Data: []byte(fmt.Sprint(2*i + 1))})
		})
		require.NoError(t, err)
		switch i % 10 {
		case 3:
			require.NoError(t, srv.Restart())
		case 7:
			srv.DropSubscriptions()
		}
	}
	for i := range total {
		select {
		case e := <-got:
			require.Equal(t, fmt.Sprint(i), string(e.Data))
		case err := <-errc:
			t.Fatalf("subscription ended: %v", err)
		case <-time.After(4 * time.Second):
			t.Fatalf("event %d never came", i)
		}
	}
	select {
	case e := <-got:
		t.Fatalf("doubled: %s", e.Data)
	case err := <-errc:
		t.Fatalf("subscription ended: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
}

// Close while appends, reads, subscriptions and state calls run: no panic,
// every call ends with nil or ErrClosed, and every later call returns
// ErrClosed.
func TestCrossStoreCloseUnderLoad(t *testing.T) {
	for round := range 4 {
		srv := testserver.New(t)
		s, err := kurrentdb.Open(context.Background(), srv.URL(), kurrentdb.Options{PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		ctx := context.Background()
		_, err = s.Append(ctx, "cl", eventstore.Any, rvEvents(3, "")...)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []error
		note := func(what string, err error) {
			if err != nil && !errors.Is(err, eventstore.ErrClosed) {
				mu.Lock()
				bad = append(bad, fmt.Errorf("%s: %w", what, err))
				mu.Unlock()
			}
		}
		stop := make(chan struct{})
		for i := range 4 {
			wg.Go(func() {
				for {
					_, err := s.Append(ctx, fmt.Sprintf("cl-%d", i), eventstore.Any, rvEvents(2, "x")...)
					note("append chosen", err)
					_, err = s.Append(ctx, fmt.Sprintf("cl-%d", i), eventstore.Any, ev("y", `{}`))
					note("append fresh", err)
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				for {
					for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
						if err != nil {
							note("readall", err)
							return
						}
					}
					for _, err := range s.ReadStream(ctx, "cl", eventstore.Forward(0)) {
						if err != nil {
							note("readstream", err)
							return
						}
					}
				}
			})
			wg.Go(func() {
				for _, err := range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
					if err != nil {
						note("subscribe", err)
						return
					}
				}
				note("subscribe", errors.New("ended without an error"))
			})
			wg.Go(func() {
				name := fmt.Sprintf("cons-%d", i)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, _, err := s.AcquireLease(ctx, name, "h", time.Second); err != nil {
						note("lease", err)
						return
					}
					if _, err := s.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: name, Error: "e", Attempts: 1,
						Event: eventstore.Event{EventData: rvEvents(1, "")[0], StreamID: "cl", Position: eventstore.Position{Major: 1}}}); err != nil {
						note("park", err)
						return
					}
					if _, _, err := s.CommandResult(ctx, "cl", "x"); err != nil {
						_ = err
					}
				}
			})
		}
		time.Sleep(time.Duration(50+round*40) * time.Millisecond)
		require.NoError(t, s.Close())
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(4 * time.Second):
			t.Fatal("calls still running after Close")
		}
		require.Empty(t, bad)
		_, err = s.Append(ctx, "cl", eventstore.Any, ev("z", `{}`))
		require.ErrorIs(t, err, eventstore.ErrClosed)
		_, err = s.Checkpoint(ctx, "c")
		require.ErrorIs(t, err, eventstore.ErrClosed)
		_, _, err = s.CommandResult(ctx, "cl", "x")
		require.ErrorIs(t, err, eventstore.ErrClosed)
		_, err = s.Head(ctx)
		require.ErrorIs(t, err, eventstore.ErrClosed)
		require.NoError(t, s.Close())
	}
}

// Opening and closing stores (each with its live subscription and
// subscribers) leaves no goroutine behind.
func TestCrossStoreNoGoroutineLeak(t *testing.T) {
	srv := testserver.New(t)
	warm := rvOpen(t, srv, kurrentdb.Options{})
	_, err := warm.Append(context.Background(), "leak", eventstore.Any, ev("x", `{}`))
	require.NoError(t, err)
	base := rvSettle()
	for i := range 10 {
		s, err := kurrentdb.Open(context.Background(), srv.URL(), kurrentdb.Options{PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
			}
		}()
		_, err = s.Append(ctx, "leak", eventstore.Any, rvEvents(1, "")...)
		require.NoError(t, err)
		_, _, err = s.AcquireLease(ctx, "leak", "h", time.Second)
		require.NoError(t, err)
		if i%2 == 0 {
			cancel()
		}
		require.NoError(t, s.Close())
		cancel()
	}
	rvNoMoreGoroutines(t, base, 2)
}

func rvSettle() int {
	runtime.GC()
	time.Sleep(300 * time.Millisecond)
	return runtime.NumGoroutine()
}

// rvNoMoreGoroutines fails t unless the goroutines come back to base (and
// slack) within ten seconds: other tests' clients (those an outage test
// leaves to end once a node answers) come and go meanwhile, so one count
// is not enough.
func rvNoMoreGoroutines(t *testing.T, base, slack int) {
	t.Helper()
	after := rvSettle()
	for deadline := time.Now().Add(10 * time.Second); after > base+slack && time.Now().Before(deadline); {
		after = rvSettle()
	}
	if after > base+slack {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		var created []string
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if strings.HasPrefix(line, "created by ") {
				created = append(created, strings.Fields(line)[2])
			}
		}
		t.Fatalf("goroutines: %d before, %d after; created by: %v", base, after, created)
	}
}
