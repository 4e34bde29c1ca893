package projection_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

func appendN(t *testing.T, s eventstore.Store, stream string, n int) {
	t.Helper()
	for i := range n {
		_, err := s.Append(context.Background(), stream, eventstore.Any, eventstore.EventData{Type: "raw", Data: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
}

func TestBatchConsumerHandsOverStoredEventsOnceInOrder(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	consumers := memory.New()
	appendN(t, store, "a-1", 250)
	var got []eventstore.Event
	var batches int
	c, err := batchconsumer.New[*projection.Consumer]("batch", store, consumers, func(_ context.Context, evs []eventstore.Event) error {
		batches++
		assert.LessOrEqual(t, len(evs), 100, "a batch holds at most BatchSize events")
		got = append(got, evs...)
		return nil
	}, nil, projection.Options{BatchSize: 100, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	require.Len(t, got, 250)
	for i, e := range got {
		assert.Equal(t, uint64(i), e.Version)
		assert.Equal(t, fmt.Sprint(i), string(e.Data), "stored events, not decoded")
	}
	assert.GreaterOrEqual(t, batches, 3)
	cp, err := consumers.Checkpoint(context.Background(), "batch")
	require.NoError(t, err)
	assert.Equal(t, got[249].Position, cp.Position)

	appendN(t, store, "a-1", 5)
	got = nil
	require.NoError(t, c.CatchUp(context.Background()))
	assert.Len(t, got, 5, "a second catch-up resumes after the checkpoint")
}

func TestBatchConsumerHandsLiveEventsOverWithoutWaitingForTheBatchDelay(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	seen := make(chan eventstore.Event, 10)
	c, err := batchconsumer.New[*projection.Consumer]("live", store, memory.New(), func(_ context.Context, evs []eventstore.Event) error {
		for _, e := range evs {
			seen <- e
		}
		return nil
	}, nil, projection.Options{MaxBatchDelay: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); assert.NoError(t, c.Run(ctx)) }()
	defer func() { cancel(); wg.Wait() }()
	appendN(t, store, "b-1", 1)
	select {
	case e := <-seen:
		assert.Equal(t, "b-1", e.StreamID)
	case <-time.After(30 * time.Second):
		require.FailNow(t, "a live event waited for the hour-long batch delay")
	}
}

func TestBatchConsumerRetriesAFailingBatchThenStops(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	consumers := memory.New()
	appendN(t, store, "c-1", 3)
	calls := 0
	boom := errors.New("store down")
	c, err := batchconsumer.New[*projection.Consumer]("failing", store, consumers, func(context.Context, []eventstore.Event) error {
		calls++
		return boom
	}, nil, projection.Options{Retry: retry.Policy{Attempts: 3, Initial: time.Microsecond, Max: time.Microsecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	err = c.CatchUp(context.Background())
	require.ErrorIs(t, err, boom)
	var he *projection.HandlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "c-1", he.Stream)
	assert.Equal(t, 3, he.Attempts)
	assert.Equal(t, 3, calls)
	cp, err := consumers.Checkpoint(context.Background(), "failing")
	require.NoError(t, err)
	assert.True(t, cp.Position.IsZero(), "the checkpoint stays before a failed batch")

	_, err = batchconsumer.New[*projection.Consumer]("nil", store, consumers, nil, nil, projection.Options{})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

// TestAConsumerThatLosesItsCheckpointStartsOverWithoutWaitingForACommit
// moves a live consumer's checkpoint from outside (as another process
// running the same consumer does) while it handles a batch: its save then
// fails, and it must start over from the moved checkpoint at once, not
// when the next event happens to be appended.
func TestAConsumerThatLosesItsCheckpointStartsOverWithoutWaitingForACommit(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	consumers := memory.New()
	appendN(t, store, "d-1", 2)
	var all []eventstore.Event
	for e, err := range store.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		all = append(all, e)
	}
	inBatch, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c, err := batchconsumer.New[*projection.Consumer]("lost", store, consumers, func(context.Context, []eventstore.Event) error {
		once.Do(func() { close(inBatch); <-release })
		return nil
	}, nil, projection.Options{BatchSize: 1, MaxBatchDelay: time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	<-inBatch
	// Another process handled both events meanwhile.
	require.NoError(t, consumers.SaveCheckpoint(context.Background(), "lost", eventstore.Start, all[1].Position, 0))
	close(release)
	require.Eventually(t, func() bool {
		st, err := c.Stats(context.Background())
		return err == nil && st.Checkpoint == all[1].Position
	}, 10*time.Second, time.Millisecond, "the consumer started over from the moved checkpoint without a new commit")
}

func newBatchConsumer(name string, events eventstore.Store, opts projection.Options) (*projection.Consumer, error) {
	return batchconsumer.New[*projection.Consumer](name, events, memory.New(),
		func(context.Context, []eventstore.Event) error { return nil }, nil, opts)
}
