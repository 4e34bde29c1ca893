package projection_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
	"github.com/cairn-es/cairn/retry"
)

// lagOf reads consumer's lag gauges: events, age, and whether they were
// observed.
func lagOf(t *testing.T, rec *oteltest.Recorder, consumer string) (int64, float64) {
	t.Helper()
	group := telemetry.MessagingConsumerGroupKey.String(consumer)
	n, ok := rec.Int64(t, "cairn.consumer.lag", group)
	require.True(t, ok, "lag observed")
	age, ok := rec.Float64(t, "cairn.consumer.lag.age", group)
	require.True(t, ok, "lag age observed")
	return n, age
}

// TestLagFollowsTheStoreWhileTheConsumerIsStopped: the lag counts the
// events after the stored checkpoint that the consumer's filter selects,
// rises as they are appended while the consumer does not run, falls to 0
// once it has caught up, and stops at projection.LagCap.
func TestLagFollowsTheStoreWhileTheConsumerIsStopped(t *testing.T) {
	defer projection.SetLagCache(0)()
	stores := map[string]func(t *testing.T) lagStore{
		"memory": func(*testing.T) lagStore { return memory.New() },
		"SQLite": func(t *testing.T) lagStore {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
			require.NoError(t, err)
			return s
		},
		"PostgreSQL": func(t *testing.T) lagStore {
			server := pgtest.ForTest(t, pgtest.Options{})
			s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "lag")})
			require.NoError(t, err)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { testLagFollowsTheStore(t, open(t)) })
	}
}

// lagStore is a store that keeps its consumers' checkpoints too.
type lagStore interface {
	eventstore.Store
	storekit.CheckpointStore
}

func testLagFollowsTheStore(t *testing.T, events lagStore) {
	rec := oteltest.New(t)
	t.Cleanup(func() { _ = events.Close() })
	c, err := projection.New("lagging", events, projectiontest.Registry(t), events,
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{Filter: eventstore.Filter{StreamPrefixes: []string{"item-"}},
			TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)

	n, age := lagOf(t, rec, "lagging")
	assert.Zero(t, n)
	assert.Zero(t, age)

	appendItems(t, events, "item-1", 0, 50)
	appendItems(t, events, "other-1", 0, 20) // not the consumer's
	time.Sleep(5 * time.Millisecond)
	n, age = lagOf(t, rec, "lagging")
	assert.EqualValues(t, 50, n)
	assert.Greater(t, age, 0.0)

	appendItems(t, events, "item-2", 0, 10)
	n, _ = lagOf(t, rec, "lagging")
	assert.EqualValues(t, 60, n, "a stopped consumer falls behind")

	require.NoError(t, c.CatchUp(context.Background()))
	n, age = lagOf(t, rec, "lagging")
	assert.Zero(t, n)
	assert.Zero(t, age)

	appendItems(t, events, "item-3", 0, projection.LagCap+5)
	n, age = lagOf(t, rec, "lagging")
	assert.EqualValues(t, projection.LagCap, n, "capped")
	assert.Greater(t, age, 0.0)
	runtime.KeepAlive(c) // its gauges last as long as it does
}

// TestLagIsCached: a reading serves the collections that follow it for a
// while, so that several readers cost one read of the store.
func TestLagIsCached(t *testing.T) {
	defer projection.SetLagCache(time.Hour)()
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	c, err := projection.New("cached", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	appendItems(t, events, "item-1", 0, 3)
	n, _ := lagOf(t, rec, "cached")
	assert.EqualValues(t, 3, n)
	appendItems(t, events, "item-1", 3, 3)
	n, _ = lagOf(t, rec, "cached")
	assert.EqualValues(t, 3, n, "the cached reading")
	runtime.KeepAlive(c)
}

// TestDeadLettersGaugeFollowsParkRetryAndSkip: the dead_letters gauge is
// the consumer's dead letters now.
func TestDeadLettersGaugeFollowsParkRetryAndSkip(t *testing.T) {
	defer projection.SetLagCache(0)()
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	failing := map[int]bool{1: true, 2: true, 3: true}
	c, err := projection.New("parking", events, projectiontest.Registry(t), memory.New(),
		projection.Typed(func(_ context.Context, v projectiontest.Item, _ codec.Decoded) error {
			if failing[v.N] {
				return errors.New("boom")
			}
			return nil
		}), projection.Options{Retry: retry.Policy{Attempts: 1}, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	group := telemetry.MessagingConsumerGroupKey.String("parking")
	parked := func() int64 {
		t.Helper()
		n, ok := rec.Int64(t, "cairn.consumer.dead_letters", group)
		require.True(t, ok)
		return n
	}
	assert.Zero(t, parked())

	appendItems(t, events, "item-1", 0, 5)
	require.NoError(t, c.CatchUp(context.Background()))
	assert.EqualValues(t, 3, parked())

	var ids []string
	for d, err := range c.DeadLetters(context.Background()) {
		require.NoError(t, err)
		ids = append(ids, d.ID)
	}
	require.Len(t, ids, 3)
	delete(failing, 1)
	require.NoError(t, c.RetryDeadLetter(context.Background(), ids[0]))
	assert.EqualValues(t, 2, parked())
	require.ErrorIs(t, c.RetryDeadLetter(context.Background(), ids[1]), projection.ErrHandlerFailed)
	assert.EqualValues(t, 2, parked(), "a failed retry stays parked")
	require.NoError(t, c.SkipDeadLetter(context.Background(), ids[2]))
	assert.EqualValues(t, 1, parked())
}

// TestABatchConsumerReportsLagButNoDeadLetters: a component's batch
// consumer parks nothing itself, so it reports no dead letters gauge, but
// its lag.
func TestABatchConsumerReportsLagButNoDeadLetters(t *testing.T) {
	defer projection.SetLagCache(0)()
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	appendN(t, events, "c-1", 4)
	c, err := newBatchConsumer("saga:ship", events, projection.Options{MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	n, _ := lagOf(t, rec, "saga:ship")
	assert.EqualValues(t, 4, n)
	_, ok := rec.Int64(t, "cairn.consumer.dead_letters", telemetry.MessagingConsumerGroupKey.String("saga:ship"))
	assert.False(t, ok)
	runtime.KeepAlive(c)
}

// TestGaugesGoWithTheConsumer: a consumer has no Close; its gauges are
// unregistered once it is garbage, so that a service that drops consumers
// does not keep reading their lag.
func TestGaugesGoWithTheConsumer(t *testing.T) {
	defer projection.SetLagCache(0)()
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	appendItems(t, events, "item-1", 0, 2)
	group := telemetry.MessagingConsumerGroupKey.String("dropped")
	func() {
		c, err := projection.New("dropped", events, projectiontest.Registry(t), memory.New(),
			func(context.Context, codec.Decoded) error { return nil }, projection.Options{MeterProvider: rec.MeterProvider, Logger: discard()})
		require.NoError(t, err)
		runtime.GC()
		n, ok := rec.Int64(t, "cairn.consumer.lag", group)
		require.True(t, ok, "reported while the consumer is held")
		assert.EqualValues(t, 2, n)
		runtime.KeepAlive(c)
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		_, ok := rec.Int64(t, "cairn.consumer.lag", group)
		return !ok
	}, 10*time.Second, 10*time.Millisecond)
}
