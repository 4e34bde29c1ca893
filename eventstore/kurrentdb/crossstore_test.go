package kurrentdb_test

// What several processes (several Stores on one server), a raw client
// writing beside them, and the test server's faults do to the store's
// promises: the attacks of an adversarial review, kept as regression
// tests. Two of them found bugs, fixed since (their comments say what
// broke); the rest held.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

func rvOpen(t *testing.T, srv *testserver.Server, opts kurrentdb.Options) *kurrentdb.Store {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	s, err := kurrentdb.Open(context.Background(), srv.URL(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rvEvents(n int, cmd string) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{ID: uuid.New(), Type: "t", SchemaVersion: 1, Data: []byte(fmt.Sprintf(`{"i":%d}`, i)),
			Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	return out
}

// rvAll is every event of $all as the store reads it, after p.
func rvAll(t *testing.T, s eventstore.Store, after eventstore.Position, f eventstore.Filter) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range s.ReadAll(context.Background(), after, f) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// rvPositionOf is the position ReadAll gives the event with id.
func rvPositionOf(t *testing.T, s eventstore.Store, id uuid.UUID) eventstore.Position {
	t.Helper()
	for _, e := range rvAll(t, s, eventstore.Start, eventstore.Filter{}) {
		if e.ID == id {
			return e.Position
		}
	}
	t.Fatalf("event %s not in $all", id)
	return eventstore.Position{}
}

// rvRetry retries an append that fails as unavailable (the client
// reconnecting after a cut or a restart).
func rvRetry(t *testing.T, fn func() (eventstore.AppendResult, error)) (eventstore.AppendResult, error) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Second)
	for {
		res, err := fn()
		if err == nil || !errors.Is(err, eventstore.ErrUnavailable) || time.Now().After(deadline) {
			return res, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// 1. Exactly-once appends

// FOUND BY REVIEW, FIXED (docs/writing-a-store.md "A repeated append is absorbed":
// when the stream holds the append's IDs in order where the expected version
// puts them, Append writes nothing and returns Duplicate). Store a caches a
// stream holding [A]; another writer then appends [B]; a's append of [A, B]
// with Any is a repeat (the memory store says Duplicate), but a answers
// from its stale cache, which holds A and not B, with an
// EventIDConflictError, without looking at the stream again
// (append.go:122-124 returns CheckRepeat's error on the first, unfresh,
// attempt).
func TestCrossStoreSplitRepeatWithStaleCacheIsDuplicate(t *testing.T) {
	srv := testserver.New(t)
	a, b := rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	ctx := context.Background()
	evs := rvEvents(2, "")
	for _, s := range []eventstore.Store{mem, a} {
		_, err := s.Append(ctx, "split", eventstore.NoStream, evs[0])
		require.NoError(t, err)
	}
	_, err := mem.Append(ctx, "split", eventstore.Any, evs[1])
	require.NoError(t, err)
	_, err = b.Append(ctx, "split", eventstore.Any, evs[1]) // another process
	require.NoError(t, err)

	want, err := mem.Append(ctx, "split", eventstore.Any, evs...)
	require.NoError(t, err, "the reference store")
	require.True(t, want.Duplicate)

	got, err := a.Append(ctx, "split", eventstore.Any, evs...)
	require.NoError(t, err, "a repeat held in order is a duplicate, not a conflict")
	assert.True(t, got.Duplicate)
	assert.Equal(t, uint64(0), got.FirstVersion)
	assert.Equal(t, uint64(1), got.LastVersion)
	assert.Len(t, readStream(t, a, "split"), 2)

	// A store that never saw the stream answers right: only the cache is wrong.
	fresh := rvOpen(t, srv, kurrentdb.Options{})
	res, err := fresh.Append(ctx, "split", eventstore.Any, evs...)
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
}

// Two stores (two processes) race the same append, with caller-chosen IDs,
// under every kind of expected version: it is stored once, exactly one
// racer says it wrote, the others say Duplicate with the same versions and
// the position ReadAll gives the last event.
func TestCrossStoreTwoStoresRaceTheSameAppend(t *testing.T) {
	srv := testserver.New(t)
	stores := []*kurrentdb.Store{rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})}
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		expected eventstore.ExpectedVersion
		prefill  int
	}{
		{"any-new", eventstore.Any, 0},
		{"any-old", eventstore.Any, 3},
		{"nostream", eventstore.NoStream, 0},
		{"exists", eventstore.StreamExists, 2},
		{"exact", eventstore.Exact(1), 2},
	} {
		for round := range 5 {
			stream := fmt.Sprintf("race-%s-%d", c.name, round)
			if c.prefill > 0 {
				_, err := stores[0].Append(ctx, stream, eventstore.NoStream, rvEvents(c.prefill, "")...)
				require.NoError(t, err)
				// Both stores cache the stream, at its current length.
				_, err = stores[1].Append(ctx, stream, eventstore.Exact(99), rvEvents(1, "")...)
				require.Error(t, err)
			}
			evs := rvEvents(3, "cmd-"+stream)
			const racers = 6
			results := make([]eventstore.AppendResult, racers)
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Go(func() {
					results[i], errs[i] = stores[i%2].Append(ctx, stream, c.expected, evs...)
				})
			}
			wg.Wait()
			wrote := 0
			for i := range racers {
				require.NoError(t, errs[i], "%s racer %d", stream, i)
				if !results[i].Duplicate {
					wrote++
				}
				assert.Equal(t, uint64(c.prefill), results[i].FirstVersion, stream)
				assert.Equal(t, uint64(c.prefill+2), results[i].LastVersion, stream)
			}
			assert.Equal(t, 1, wrote, "%s: exactly one racer wrote", stream)
			got := readStream(t, stores[0], stream)
			require.Len(t, got, c.prefill+3, stream)
			for i := range racers {
				assert.Equal(t, got[len(got)-1].Position, results[i].Position, "%s: the result's position is the last event's", stream)
			}
			assert.Equal(t, got[len(got)-1].Position, rvPositionOf(t, stores[1], evs[2].ID))
		}
	}
}

// Two stores append different events with chosen IDs to one stream with
// Any: every append lands, once, none is called a duplicate.
func TestCrossStoreTwoStoresRaceDifferentAppends(t *testing.T) {
	srv := testserver.New(t)
	stores := []*kurrentdb.Store{rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})}
	ctx := context.Background()
	const racers, each = 6, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[uuid.UUID]bool{}
	for i := range racers {
		wg.Go(func() {
			for range each {
				evs := rvEvents(2, "")
				res, err := stores[i%2].Append(ctx, "diff", eventstore.Any, evs...)
				if !assert.NoError(t, err) {
					return
				}
				assert.False(t, res.Duplicate)
				mu.Lock()
				ids[evs[0].ID], ids[evs[1].ID] = true, true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := readStream(t, stores[0], "diff")
	require.Len(t, got, racers*each*2)
	for _, e := range got {
		assert.True(t, ids[e.ID])
		delete(ids, e.ID)
	}
}

// A lost connection before or after the commit, then (maybe) the server's
// ID cache forgotten or the server restarted: the same append sent again,
// by the same store or by another, is stored once; Duplicate says whether
// the first attempt wrote.
func TestCrossStoreRetryAfterLossForgetAndRestart(t *testing.T) {
	srv := testserver.New(t)
	ctx := context.Background()
	a := rvOpen(t, srv, kurrentdb.Options{})
	b := rvOpen(t, srv, kurrentdb.Options{})
	n := 0
	for _, when := range []testserver.Disconnect{testserver.BeforeCommit, testserver.AfterCommit} {
		for _, then := range []string{"nothing", "forget", "restart"} {
			for _, exp := range []string{"any", "exists", "exact", "nostream"} {
				for _, retrier := range []*kurrentdb.Store{a, b} {
					n++
					stream := fmt.Sprintf("retry-%d", n)
					var expected eventstore.ExpectedVersion
					prefill := 0
					switch exp {
					case "any":
						expected, prefill = eventstore.Any, 1
					case "exists":
						expected, prefill = eventstore.StreamExists, 2
					case "exact":
						expected, prefill = eventstore.Exact(0), 1
					case "nostream":
						expected = eventstore.NoStream
					}
					if prefill > 0 {
						_, err := a.Append(ctx, stream, eventstore.NoStream, rvEvents(prefill, "")...)
						require.NoError(t, err)
					}
					evs := rvEvents(2, "c")
					srv.DisconnectNextAppend(when)
					_, err := a.Append(ctx, stream, expected, evs...)
					require.ErrorIs(t, err, eventstore.ErrUnavailable, stream)
					switch then {
					case "forget":
						srv.ForgetEventIDs()
					case "restart":
						require.NoError(t, srv.Restart())
					}
					res, err := rvRetry(t, func() (eventstore.AppendResult, error) { return retrier.Append(ctx, stream, expected, evs...) })
					require.NoError(t, err, "%s %v %s %s", stream, when, then, exp)
					assert.Equal(t, when == testserver.AfterCommit, res.Duplicate, "%s %v %s %s", stream, when, then, exp)
					got := readStream(t, a, stream)
					require.Len(t, got, prefill+2, "%s %v %s %s: stored once", stream, when, then, exp)
					assert.Equal(t, evs[1].ID, got[len(got)-1].ID)
					assert.Equal(t, got[len(got)-1].Position, res.Position)
					assert.Equal(t, uint64(prefill), res.FirstVersion)
					// And again, now that both caches may be warm.
					res, err = rvRetry(t, func() (eventstore.AppendResult, error) { return a.Append(ctx, stream, expected, evs...) })
					require.NoError(t, err)
					assert.True(t, res.Duplicate)
				}
			}
		}
	}
}

// Partial and displaced repeats are EventIDConflictErrors, from a store
// that knows the stream and from one that does not; nothing is written.
func TestCrossStorePartialRepeatsConflict(t *testing.T) {
	srv := testserver.New(t)
	a := rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	evs := rvEvents(3, "")
	_, err := a.Append(ctx, "partial", eventstore.NoStream, evs[0], evs[1])
	require.NoError(t, err)
	for _, s := range []*kurrentdb.Store{a, rvOpen(t, srv, kurrentdb.Options{})} {
		for _, c := range []struct {
			expected eventstore.ExpectedVersion
			events   []eventstore.EventData
		}{
			{eventstore.Any, []eventstore.EventData{evs[0], evs[2]}},
			{eventstore.Any, []eventstore.EventData{evs[2], evs[1]}},
			{eventstore.Any, []eventstore.EventData{evs[1], evs[0]}},
			{eventstore.Exact(1), []eventstore.EventData{evs[0], evs[1]}}, // displaced
			{eventstore.StreamExists, []eventstore.EventData{evs[0], evs[1]}},
			{eventstore.Exact(0), []eventstore.EventData{evs[1], evs[2]}},
		} {
			_, err := s.Append(ctx, "partial", c.expected, c.events...)
			var conflict *eventstore.EventIDConflictError
			if c.expected.IsStreamExists() {
				// StreamExists puts the first event after version 0: a
				// repeat at 0 is displaced.
				require.ErrorAs(t, err, &conflict, "%v", c.expected)
				continue
			}
			require.ErrorAs(t, err, &conflict, "%v %v", c.expected, c.events)
			assert.Equal(t, "partial", conflict.Stream)
		}
		assert.Len(t, readStream(t, a, "partial"), 2, "nothing written")
	}
}

// With a repeat cache of one stream, appends alternating between streams
// still find their repeats; a third store's raw writes in between do not
// fool it.
func TestCrossStoreRepeatCacheOfOneStream(t *testing.T) {
	srv := testserver.New(t)
	s := rvOpen(t, srv, kurrentdb.Options{RepeatStreams: 1})
	other := rvOpen(t, srv, kurrentdb.Options{RepeatStreams: 1})
	ctx := context.Background()
	sent := map[string][][]eventstore.EventData{}
	for i := range 30 {
		stream := fmt.Sprintf("lru-%d", i%3)
		evs := rvEvents(1+i%2, fmt.Sprintf("cmd-%d", i))
		res, err := s.Append(ctx, stream, eventstore.Any, evs...)
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		sent[stream] = append(sent[stream], evs)
		_, err = other.Append(ctx, stream, eventstore.Any, rvEvents(1, "")...)
		require.NoError(t, err)
		// repeat an earlier append of another stream
		old := fmt.Sprintf("lru-%d", (i+1)%3)
		if prev := sent[old]; len(prev) > 0 {
			res, err := s.Append(ctx, old, eventstore.Any, prev[0]...)
			require.NoError(t, err)
			assert.True(t, res.Duplicate, "%s", old)
			cr, found, err := s.CommandResult(ctx, old, prev[0][0].Metadata.CommandID)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, res.FirstVersion, cr.FirstVersion)
			assert.Equal(t, res.LastVersion, cr.LastVersion)
			assert.Equal(t, res.Position, cr.Position)
		}
	}
}

// FOUND BY REVIEW, FIXED (CommandIndex: CommandResult reports what command
// commandID appended; found false when the stream holds no event of it).
// When the store's append is absorbed as a twin's (Duplicate by the
// nonce), it records its own events' metadata in its cache (append.go:165),
// not what the stream holds: here the twin (another store) wrote event A
// for command "c1", this store repeated A for command "c2", and from then
// on this store says c2 appended A and c1 appended nothing, while the
// stream and any other store say the opposite.
func TestCrossStoreCommandIndexAfterAbsorbedTwinWithOtherCommand(t *testing.T) {
	srv := testserver.New(t)
	a, b := rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	_, err := a.Append(ctx, "twin-cmd", eventstore.NoStream, rvEvents(1, "c0")...)
	require.NoError(t, err)
	// a knows the stream at version 0; b writes A for c1.
	evA := rvEvents(1, "c1")[0]
	_, err = b.Append(ctx, "twin-cmd", eventstore.Any, evA)
	require.NoError(t, err)
	evA2 := evA
	evA2.Metadata.CommandID = "c2"
	res, err := a.Append(ctx, "twin-cmd", eventstore.Any, evA2)
	require.NoError(t, err)
	require.True(t, res.Duplicate)

	got := readStream(t, a, "twin-cmd")
	require.Len(t, got, 2)
	require.Equal(t, "c1", got[1].Metadata.CommandID, "the stream holds c1's event")

	_, found, err := b.CommandResult(ctx, "twin-cmd", "c1")
	require.NoError(t, err)
	require.True(t, found, "the store that did not cache it")
	_, found, err = a.CommandResult(ctx, "twin-cmd", "c1")
	require.NoError(t, err)
	assert.True(t, found, "c1 appended event 1")
	_, found, err = a.CommandResult(ctx, "twin-cmd", "c2")
	require.NoError(t, err)
	assert.False(t, found, "the stream holds no event of c2")
}

// A store that cached a stream answers CommandResult and repeats right
// after other writers (another store, a raw client) appended to it.
func TestCrossStoreCommandResultAfterOtherWriters(t *testing.T) {
	srv := testserver.New(t)
	a, b := rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})
	cli := rawClient(t, srv)
	ctx := context.Background()
	_, err := a.Append(ctx, "cmd-other", eventstore.NoStream, rvEvents(2, "first")...)
	require.NoError(t, err)
	_, found, err := a.CommandResult(ctx, "cmd-other", "second")
	require.NoError(t, err)
	require.False(t, found)
	second := rvEvents(3, "second")
	res, err := b.Append(ctx, "cmd-other", eventstore.Any, second...)
	require.NoError(t, err)
	_, err = cli.AppendToStream(ctx, "cmd-other", esdb.AppendToStreamOptions{},
		esdb.EventData{EventType: "raw", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`), Metadata: []byte(`{"command_id":"raw"}`)})
	require.NoError(t, err)
	cr, found, err := a.CommandResult(ctx, "cmd-other", "second")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, res.FirstVersion, cr.FirstVersion)
	assert.Equal(t, res.LastVersion, cr.LastVersion)
	assert.Equal(t, res.Position, cr.Position)
	cr, found, err = a.CommandResult(ctx, "cmd-other", "raw")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, uint64(5), cr.FirstVersion)
	// a's repeat of b's append, with every expected version that fits.
	for _, exp := range []eventstore.ExpectedVersion{eventstore.Any, eventstore.StreamExists, eventstore.Exact(1)} {
		r, err := a.Append(ctx, "cmd-other", exp, second...)
		require.NoError(t, err, "%v", exp)
		assert.True(t, r.Duplicate)
		assert.Equal(t, res.Position, r.Position)
	}
	// a's fresh append after its cache went stale lands once.
	r, err := a.Append(ctx, "cmd-other", eventstore.Exact(5), rvEvents(1, "third")...)
	require.NoError(t, err)
	assert.False(t, r.Duplicate)
	assert.Equal(t, uint64(6), r.FirstVersion)
}

// ---------------------------------------------------------------------------
// 2. Bad input

// Bad input never panics, never writes, and its error names the stream,
// the event's index and the field; with IDs chosen or not, on a stream
// the store knows and on one it does not.
func TestCrossStoreBadInputWritesNothing(t *testing.T) {
	srv := testserver.New(t)
	s := rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	_, err := s.Append(ctx, "bad-known", eventstore.NoStream, rvEvents(1, "")...)
	require.NoError(t, err)
	good := func() eventstore.EventData { return rvEvents(1, "")[0] }
	dupID := good()
	big := good()
	big.Data = make([]byte, storekit.MaxEventSize+1)
	cases := map[string][]eventstore.EventData{
		"none":        nil,
		"nil data":    {good(), {ID: uuid.New(), Type: "t"}},
		"empty type":  {good(), {ID: uuid.New(), Data: []byte{}}},
		"$ type":      {good(), {ID: uuid.New(), Type: "$metadata", Data: []byte{}}},
		"bad utf8":    {good(), {ID: uuid.New(), Type: "t\xff", Data: []byte{}}},
		"dup ids":     {dupID, dupID},
		"too big":     {good(), big},
		"cairn. type": {good(), {ID: uuid.New(), Type: "cairn.checkpoint", Data: []byte{}}},
		"bad meta":    {good(), {ID: uuid.New(), Type: "t", Data: []byte{}, Metadata: eventstore.Metadata{CommandID: "a\x00b"}}},
	}
	for _, stream := range []string{"bad-known", "bad-new"} {
		for name, evs := range cases {
			for _, chosen := range []bool{true, false} {
				if name == "dup ids" && !chosen {
					continue // zero IDs are two fresh ones
				}
				in := make([]eventstore.EventData, len(evs))
				copy(in, evs)
				if !chosen {
					for i := range in {
						in[i].ID = uuid.Nil
					}
				}
				var res eventstore.AppendResult
				require.NotPanics(t, func() { res, err = s.Append(ctx, stream, eventstore.Any, in...) }, name)
				require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "%s %s", stream, name)
				var bad *eventstore.InvalidArgumentError
				require.ErrorAs(t, err, &bad)
				assert.Equal(t, stream, bad.Stream, name)
				assert.Contains(t, err.Error(), stream, name)
				assert.Zero(t, res)
			}
		}
	}
	require.Len(t, readStream(t, s, "bad-known"), 1)
	require.Empty(t, readStream(t, s, "bad-new"))
	for _, stream := range []string{"", "$bad", kurrentdb.StatePrefix + "x", "a\x00b", strings.Repeat("s", storekit.MaxStreamLen+1)} {
		require.NotPanics(t, func() { _, err = s.Append(ctx, stream, eventstore.Any, good()) })
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "%q", stream)
	}
	// Other entry points.
	_, _, err = s.CommandResult(ctx, "", "c")
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, err = s.Checkpoint(ctx, "")
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	require.ErrorIs(t, s.SaveCheckpoint(ctx, "c", eventstore.Start, eventstore.Start, storekit.Fence(1<<63)), eventstore.ErrInvalidArgument)
	_, _, err = s.AcquireLease(ctx, "c", "", time.Second)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, _, err = s.AcquireLease(ctx, "c", "h", 0)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	_, err = s.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: "c"})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	require.ErrorIs(t, s.SaveSnapshot(ctx, storekit.Snapshot{Stream: "x", Type: "t"}), eventstore.ErrInvalidArgument)
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{""}}) {
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	}
	for _, err := range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{Types: []string{""}}) {
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	}
	require.Empty(t, rvAll(t, s, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"c", "x"}}))
}
