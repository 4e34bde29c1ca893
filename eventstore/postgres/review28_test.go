package postgres_test

// Review 28: group commit of concurrent single-event appends, attacked
// with concurrent repeats of one event ID, every expected-version kind,
// multi-event appends on the same streams, cancellation and Close.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

func r28Ev(id uuid.UUID) eventstore.EventData {
	return eventstore.EventData{ID: id, Type: "t", SchemaVersion: 1, Data: []byte(`{}`)}
}

// One event appended by 12 goroutines at once, with Any, NoStream or the
// exact version of its place: exactly one writes it, every other is told
// it is a duplicate with the same versions and position.
func TestReview28SameEventFromManyAppendsAtOnce(t *testing.T) {
	s := newStoreAt(t, withPoolSize(server.URL, 20), postgres.Options{})
	ctx := context.Background()
	const appenders, rounds = 12, 15
	for round := range rounds {
		stream := "same"
		e := r28Ev(eventstore.NewEventID())
		var wg sync.WaitGroup
		results := make([]eventstore.AppendResult, appenders)
		errs := make([]error, appenders)
		start := make(chan struct{})
		for a := range appenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				exp := eventstore.Any
				if a%3 == 1 {
					exp = eventstore.Exact(uint64(round) - 1)
					if round == 0 {
						exp = eventstore.NoStream
					}
				} else if a%3 == 2 && round > 0 {
					exp = eventstore.StreamExists
				}
				<-start
				results[a], errs[a] = s.Append(ctx, stream, exp, e)
			}()
		}
		close(start)
		wg.Wait()
		writes := 0
		for a := range appenders {
			require.NoError(t, errs[a], "round %d appender %d", round, a)
			if !results[a].Duplicate {
				writes++
			}
			require.Equal(t, uint64(round), results[a].FirstVersion, "round %d appender %d: %+v", round, a, results[a])
			require.Equal(t, results[0].Position, results[a].Position, "round %d appender %d", round, a)
		}
		require.Equal(t, 1, writes, "round %d: the event was written %d times", round, writes)
	}
	n := 0
	for e, err := range s.ReadStream(ctx, "same", eventstore.Forward(0)) {
		require.NoError(t, err)
		require.Equal(t, uint64(n), e.Version)
		n++
	}
	require.Equal(t, rounds, n)
}

// Single-event appends (grouped) and three-event appends racing on a few
// streams with every kind of expected version, while a subscriber follows:
// each append's result is consistent with the stream as read, every event
// is read once, in position order, each stream in version order.
func TestReview28GroupsAndMultiEventAppendsOnOneStream(t *testing.T) {
	s := newStoreAt(t, withPoolSize(server.URL, 24), postgres.Options{PageSize: 50})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, per, streams = 12, 40, 3
	type written struct {
		stream string
		r      eventstore.AppendResult
		ids    []uuid.UUID
	}
	var mu sync.Mutex
	var all []written
	var total atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				stream := fmt.Sprintf("mix-%d", (w+i)%streams)
				n := 1
				if w%4 == 0 {
					n = 3
				}
				var es []eventstore.EventData
				var ids []uuid.UUID
				for range n {
					id := eventstore.NewEventID()
					es, ids = append(es, r28Ev(id)), append(ids, id)
				}
				var exp eventstore.ExpectedVersion
				switch i % 4 {
				case 0:
					exp = eventstore.Any
				case 1:
					exp = eventstore.StreamExists
				case 2:
					exp = eventstore.NoStream
				default:
					// The version last seen: often stale.
					var last uint64
					found := false
					for e, err := range s.ReadStream(ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
						if err != nil {
							t.Error(err)
							return
						}
						last, found = e.Version, true
					}
					exp = eventstore.NoStream
					if found {
						exp = eventstore.Exact(last)
					}
				}
				r, err := s.Append(ctx, stream, exp, es...)
				var wrong *eventstore.WrongVersionError
				switch {
				case err == nil:
					if r.Duplicate {
						t.Errorf("a new event reported as a duplicate: %+v", r)
						return
					}
					if r.LastVersion-r.FirstVersion != uint64(n-1) {
						t.Errorf("%d events given versions %d..%d", n, r.FirstVersion, r.LastVersion)
					}
					if v, ok := exp.Version(); ok && r.FirstVersion != v+1 {
						t.Errorf("Exact(%d) written at %d", v, r.FirstVersion)
					}
					if exp.IsNoStream() && r.FirstVersion != 0 {
						t.Errorf("NoStream written at %d", r.FirstVersion)
					}
					mu.Lock()
					all = append(all, written{stream, r, ids})
					mu.Unlock()
					total.Add(int64(n))
				case errors.As(err, &wrong):
					// Acceptable for any expectation but Any.
					if exp == eventstore.Any {
						t.Errorf("Any append failed: %v", err)
						return
					}
					if exp.Matches(wrong.Actual.Version()) {
						t.Errorf("conflict whose actual state matches the expectation: %v", err)
					}
				default:
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	// Every acknowledged append reads back at its versions and position.
	byID := map[uuid.UUID]eventstore.Event{}
	versions := map[string]uint64{}
	var last eventstore.Position
	count := 0
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		require.True(t, last.Before(e.Position), "position order: %v after %v", e.Position, last)
		last = e.Position
		if v, ok := versions[e.StreamID]; ok {
			require.Equal(t, v+1, e.Version, "stream %s in ReadAll", e.StreamID)
		} else {
			require.Equal(t, uint64(0), e.Version, "stream %s in ReadAll", e.StreamID)
		}
		versions[e.StreamID] = e.Version
		byID[e.ID] = e
		count++
	}
	require.Equal(t, int(total.Load()), count)
	for _, w := range all {
		for k, id := range w.ids {
			e, ok := byID[id]
			require.True(t, ok, "acknowledged event %s not stored", id)
			require.Equal(t, w.stream, e.StreamID)
			require.Equal(t, w.r.FirstVersion+uint64(k), e.Version)
			if k == len(w.ids)-1 {
				require.Equal(t, w.r.Position, e.Position)
			}
		}
	}
	// A subscription from the start sees the same.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	seen := 0
	for e, err := range s.Subscribe(sctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			break
		}
		_ = e
		seen++
		if seen == count {
			scancel()
		}
	}
	require.Equal(t, count, seen)
}

// Appends whose context ends while they wait in or for a group: each
// returns at once with its context's error or a result; retried with the
// same event, it is written once or reported a duplicate, never a
// conflict, and the stream stays dense.
func TestReview28CanceledGroupAppendsRetryCleanly(t *testing.T) {
	s := newStoreAt(t, withPoolSize(server.URL, 20), postgres.Options{})
	ctx := context.Background()
	const writers, per = 12, 25
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				stream := fmt.Sprintf("cancel-%d", w%3)
				e := r28Ev(eventstore.NewEventID())
				cctx, cancel := context.WithTimeout(ctx, time.Duration(i%5)*200*time.Microsecond)
				_, err := s.Append(cctx, stream, eventstore.Any, e)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("append: %v", err)
					return
				}
				// Retry with the event the caller could not know the fate of.
				r, err := s.Append(ctx, stream, eventstore.Any, e)
				if err != nil {
					t.Errorf("retry after %v: %v", err, err)
					return
				}
				_ = r
				written.Add(1)
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	count := 0
	for st := range 3 {
		n := uint64(0)
		for e, err := range s.ReadStream(ctx, fmt.Sprintf("cancel-%d", st), eventstore.Forward(0)) {
			require.NoError(t, err)
			require.Equal(t, n, e.Version)
			n++
		}
		count += int(n)
	}
	require.Equal(t, int(written.Load()), count)
}

// Close while groups form and run: every append returns, with a result or
// ErrClosed, and what was acknowledged is stored.
func TestReview28CloseWhileGroupsRun(t *testing.T) {
	schema := server.NewSchema("test")
	s, err := postgres.Open(context.Background(), withPoolSize(server.URL, 8), postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { dropSchema(t, schema) })
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uuid.UUID]bool{}
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				e := r28Ev(eventstore.NewEventID())
				_, err := s.Append(ctx, fmt.Sprintf("close-%d", w%4), eventstore.Any, e)
				if err != nil {
					if !errors.Is(err, eventstore.ErrClosed) {
						t.Errorf("append during Close: %v", err)
					}
					return
				}
				mu.Lock()
				acked[e.ID] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close hangs under group appends")
	}
	wg.Wait()
	s2 := newStoreAt(t, server.URL, postgres.Options{Schema: schema})
	stored := map[uuid.UUID]bool{}
	for e, err := range s2.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		stored[e.ID] = true
	}
	for id := range acked {
		require.True(t, stored[id], "acknowledged %s not stored", id)
	}
}
