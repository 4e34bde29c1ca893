package storecopy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// item is the event the projections of these tests count, by N.
type item struct {
	N int `json:"n"`
}

// noise is the other events' type, which the projections skip.
type noise struct{}

func itemRegistry(t testing.TB) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[item](reg, "item", 1))
	require.NoError(t, codec.Register[noise](reg, "noise", 1))
	require.NoError(t, reg.Validate())
	return reg
}

// appendItems appends items from to to-1 to the streams s-0, s-1 and s-2 in
// turn, with an event of another type after every third, so that a
// consumer filtered on a stream sees events between its own.
func appendItems(t testing.TB, s eventstore.Store, from, to int) {
	t.Helper()
	ctx := context.Background()
	for n := from; n < to; n++ {
		_, err := s.Append(ctx, fmt.Sprintf("s-%d", n%3), eventstore.Any,
			eventstore.EventData{Type: "item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, n)})
		require.NoError(t, err)
		if n%3 == 2 {
			_, err = s.Append(ctx, "noise", eventstore.Any, eventstore.EventData{Type: "noise", SchemaVersion: 1, Data: []byte(`{}`)})
			require.NoError(t, err)
		}
	}
}

// readModel counts the items a projection applied, by N: a projection that
// resumes on the target without skipping or repeating counts each once.
type readModel struct {
	mu     sync.Mutex
	seen   map[int]int
	failOn atomic.Int64 // the N the handler fails on; -1: none
}

func newReadModel(failOn int) *readModel {
	m := &readModel{seen: map[int]int{}}
	m.failOn.Store(int64(failOn))
	return m
}

func (m *readModel) handle(_ context.Context, v item, _ codec.Decoded) error {
	if int64(v.N) == m.failOn.Load() {
		return errors.New("the handler fails on this item")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[v.N]++
	return nil
}

func (m *readModel) counts() map[int]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]int, len(m.seen))
	for k, v := range m.seen {
		out[k] = v
	}
	return out
}

func newProjection(t testing.TB, name string, s eventstore.Store, m *readModel, filter eventstore.Filter) *projection.Consumer {
	t.Helper()
	c, err := projection.New(name, s, itemRegistry(t), s.(storekit.CheckpointStore), projection.Typed(m.handle),
		projection.Options{Filter: filter, Retry: retry.Policy{Attempts: 1}, NoStatsLog: true,
			Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return c
}

// targetPosition returns the position of the event with id in s.
func targetPosition(t testing.TB, s eventstore.Store, id uuid.UUID) eventstore.Position {
	t.Helper()
	for _, e := range readAll(t, s) {
		if e.ID == id {
			return e.Position
		}
	}
	require.FailNow(t, "no such event", "%s", id)
	return eventstore.Position{}
}

// testConsumerState copies from, which it fills, into to, which holds
// events of its own first so that no position is the same in both, with
// consumers at the start, mid-log on an event, a filtered one, at the end,
// and a dead letter and a snapshot; then runs the projections on the target
// and checks that they resume exactly where they left off.
func testConsumerState(t *testing.T, from, to eventstore.Store) {
	ctx := context.Background()
	_, err := to.Append(ctx, "target-only", eventstore.NoStream,
		eventstore.EventData{Type: "noise", Data: []byte(`1`)}, eventstore.EventData{Type: "noise", Data: []byte(`2`)})
	require.NoError(t, err)
	fromCP := from.(storekit.CheckpointStore)

	appendItems(t, from, 0, 30)
	all := newReadModel(13)
	require.NoError(t, newProjection(t, "all", from, all, eventstore.Filter{}).CatchUp(ctx))
	s1 := newReadModel(-1)
	s1Filter := eventstore.Filter{StreamPrefixes: []string{"s-1"}}
	require.NoError(t, newProjection(t, "only-s1", from, s1, s1Filter).CatchUp(ctx))
	appendItems(t, from, 30, 31) // an s-1 item: "only-s1" is now before the last events, between others
	appendItems(t, from, 31, 45)
	src := readAll(t, from)
	mid := src[len(src)/2]
	last := src[len(src)-1]
	require.NoError(t, fromCP.SaveCheckpoint(ctx, "at-start", eventstore.Start, eventstore.Start, 0))
	require.NoError(t, fromCP.SaveCheckpoint(ctx, "on-event", eventstore.Start, mid.Position, 0))
	require.NoError(t, fromCP.SaveCheckpoint(ctx, "at-end", eventstore.Start, last.Position, 0))
	require.NoError(t, from.(storekit.SnapshotStore).SaveSnapshot(ctx,
		storekit.Snapshot{Stream: "s-0", Version: 3, Type: "state", SchemaVersion: 2, Data: []byte(`{"sum":9}`)}))
	srcLetters := collect(t, from.(storekit.DeadLetterStore).DeadLetters(ctx, "all"))
	require.Len(t, srcLetters, 1)

	r, err := storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true, Snapshots: true})
	require.NoError(t, err)
	assert.Equal(t, int64(len(src)), r.Copied)
	assert.Equal(t, int64(4), r.Consumers, "all, only-s1, on-event and at-end moved; at-start stays at the start")
	assert.Equal(t, int64(1), r.DeadLetters)
	assert.Equal(t, int64(1), r.Snapshots)

	toCP := to.(storekit.CheckpointStore)
	for name, want := range map[string]eventstore.Position{
		"at-start": eventstore.Start,
		"on-event": targetPosition(t, to, mid.ID),
		"at-end":   targetPosition(t, to, last.ID),
	} {
		cp, err := toCP.Checkpoint(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, want, cp.Position, name)
	}

	letters := collect(t, to.(storekit.DeadLetterStore).DeadLetters(ctx, "all"))
	require.Len(t, letters, 1)
	d, sd := letters[0], srcLetters[0]
	assert.Equal(t, sd.ID, d.ID)
	assert.Equal(t, sd.Event.ID, d.Event.ID)
	assert.Equal(t, targetPosition(t, to, sd.Event.ID), d.Event.Position, "the target's position")
	assert.Equal(t, sd.Part, d.Part)
	assert.Equal(t, sd.Error, d.Error)
	assert.Equal(t, sd.Attempts, d.Attempts)
	// PostgreSQL keeps microseconds, SQLite and memory nanoseconds.
	assert.WithinDuration(t, sd.FirstFailure, d.FirstFailure, time.Microsecond)
	assert.WithinDuration(t, sd.LastFailure, d.LastFailure, time.Microsecond)
	assert.Equal(t, uint64(1), d.Generation)

	snap, ok, err := to.(storekit.SnapshotStore).LoadSnapshot(ctx, "s-0")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(3), snap.Version)
	assert.Equal(t, `{"sum":9}`, string(snap.Data))

	// A rerun changes nothing.
	r, err = storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true, Snapshots: true})
	require.NoError(t, err)
	assert.Zero(t, r.Copied+r.Duplicates+r.Consumers+r.DeadLetters+r.Snapshots, "%+v", r)
	letters = collect(t, to.(storekit.DeadLetterStore).DeadLetters(ctx, "all"))
	require.Len(t, letters, 1)
	assert.Equal(t, uint64(1), letters[0].Generation, "no park again")

	// The projections resume on the target: every item counted once.
	allOnTarget := newProjection(t, "all", to, all, eventstore.Filter{})
	require.NoError(t, allOnTarget.CatchUp(ctx))
	all.failOn.Store(-1)
	require.NoError(t, allOnTarget.RetryDeadLetter(ctx, d.ID))
	require.NoError(t, newProjection(t, "only-s1", to, s1, s1Filter).CatchUp(ctx))
	want, wantS1 := map[int]int{}, map[int]int{}
	for n := range 45 {
		want[n] = 1
		if n%3 == 1 {
			wantS1[n] = 1
		}
	}
	assert.Equal(t, want, all.counts())
	assert.Equal(t, wantS1, s1.counts())
	n, err := to.(storekit.DeadLetterStore).CountDeadLetters(ctx, "all")
	require.NoError(t, err)
	assert.Zero(t, n, "the retry on the target resolved it")
}

func collect[T any](t testing.TB, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

func TestConsumerStateMemoryToSQLite(t *testing.T) {
	from := memory.New()
	t.Cleanup(func() { _ = from.Close() })
	testConsumerState(t, from, openSQLite(t, filepath.Join(t.TempDir(), "to.db")))
}

func TestConsumerStateSQLiteToPostgres(t *testing.T) {
	testConsumerState(t, openSQLite(t, filepath.Join(t.TempDir(), "from.db")), newPostgres(t))
}

// TestConsumersOfAResumedCopy stops a copy with consumers part-way, then
// reruns it: the consumers whose checkpoints the first run passed are
// translated from a scan of the part copied, the others by the rerun's
// copy pass.
func TestConsumersOfAResumedCopy(t *testing.T) {
	ctx := context.Background()
	from, to := memory.New(), memory.New()
	_, err := to.Append(ctx, "target-only", eventstore.NoStream, eventstore.EventData{Type: "noise", Data: []byte(`1`)})
	require.NoError(t, err)
	appendItems(t, from, 0, 60)
	src := readAll(t, from)
	for i, e := range src {
		if i%7 == 3 || i == len(src)-1 {
			require.NoError(t, from.SaveCheckpoint(ctx, fmt.Sprintf("c-%02d", i), eventstore.Start, e.Position, 0))
		}
	}
	failing := &failingStore{Store: to}
	failing.failAt.Store(15)
	_, err = storecopy.Copy(ctx, from, failing, storecopy.Options{Consumers: true})
	require.ErrorIs(t, err, errLostReply)
	r, err := storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true})
	require.NoError(t, err)
	assert.Positive(t, r.Consumers)
	for i, e := range src {
		if i%7 == 3 || i == len(src)-1 {
			cp, err := to.Checkpoint(ctx, fmt.Sprintf("c-%02d", i))
			require.NoError(t, err)
			assert.Equal(t, targetPosition(t, to, e.ID), cp.Position, "consumer c-%02d", i)
		}
	}
	r, err = storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true})
	require.NoError(t, err)
	assert.Zero(t, r.Consumers)
}

// withoutCatalog hides the source's Catalog.
type withoutCatalog struct{ eventstore.Store }

func TestConsumersNeedACatalog(t *testing.T) {
	ctx := context.Background()
	from, to := memory.New(), memory.New()
	appendItems(t, from, 0, 3)
	_, err := storecopy.Copy(ctx, withoutCatalog{from}, to, storecopy.Options{Consumers: true})
	var unsupported *storecopy.UnsupportedError
	require.ErrorAs(t, err, &unsupported)
	require.ErrorIs(t, err, storecopy.ErrUnsupported)
	assert.Equal(t, "source", unsupported.Store)
	assert.Equal(t, "storekit.Catalog", unsupported.Missing)
	assert.Contains(t, err.Error(), "storekit.DeadLetterStore")
	_, err = storecopy.Copy(ctx, from, withoutCatalog{to}, storecopy.Options{Snapshots: true})
	require.ErrorAs(t, err, &unsupported)
	assert.Equal(t, "target", unsupported.Store)
	assert.Equal(t, "storekit.SnapshotStore", unsupported.Missing)
	assert.Empty(t, readAll(t, to), "nothing copied")
}

// TestConsumersRunningOnTheTarget refuses to copy consumer state over a
// consumer that holds a lease in the target: it runs there.
func TestConsumersRunningOnTheTarget(t *testing.T) {
	ctx := context.Background()
	from, to := memory.New(), memory.New()
	appendItems(t, from, 0, 3)
	require.NoError(t, from.SaveCheckpoint(ctx, "view", eventstore.Start, readAll(t, from)[1].Position, 0))
	_, ok, err := to.AcquireLease(ctx, "view", "service-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true})
	var leased *storecopy.LeasedError
	require.ErrorAs(t, err, &leased)
	require.ErrorIs(t, err, storecopy.ErrLeased)
	assert.Equal(t, "view", leased.Consumer)
	assert.Equal(t, "service-1", leased.Holder)
	assert.Empty(t, readAll(t, to), "nothing copied")
}
