package projectiontest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// waitLimit bounds how long the suite waits for something that must
// happen; it is a liveness bound, not a speed check.
const waitLimit = 20 * time.Second

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastRetry retries quickly, so failure tests stay short.
var fastRetry = retry.Policy{Attempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond}

// failOn returns a failure switch: the handler fails on the items in set
// while on is true.
type failOn struct {
	set map[int]bool
	on  atomic.Bool
}

func newFailOn(ns ...int) *failOn {
	f := &failOn{set: make(map[int]bool)}
	for _, n := range ns {
		f.set[n] = true
	}
	f.on.Store(true)
	return f
}

func (f *failOn) check(n int) error {
	if f.on.Load() && f.set[n] {
		return errors.New("refusing item " + itemKey(n))
	}
	return nil
}

func lastPosition(t testing.TB, s eventstore.Store) eventstore.Position {
	t.Helper()
	var last eventstore.Position
	for e, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		last = e.Position
	}
	return last
}

func plainCounter(seen *seen, fail func(int) error) projection.Handler {
	return projection.Typed(func(ctx context.Context, it Item, d codec.Decoded) error {
		if fail != nil {
			if err := fail(it.N); err != nil {
				return err
			}
		}
		seen.add(it.N)
		return nil
	})
}

func testCatchUpAndLive[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	appendItems(t, st.Events, "item-a", 0, 250, 0)
	got := newSeen()
	c, err := projection.New("live", st.Events, Registry(t), st.Consumers, plainCounter(got, nil),
		projection.Options{BatchSize: 32, MaxBatchDelay: 5 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return got.len() == 250 }, waitLimit, 5*time.Millisecond)
	appendItems(t, st.Events, "item-b", 250, 50, 0)
	require.Eventually(t, func() bool { return got.len() == 300 }, waitLimit, 5*time.Millisecond)
	last := lastPosition(t, st.Events)
	require.Eventually(t, func() bool {
		cp, err := st.Consumers.Checkpoint(ctx, "live")
		return err == nil && cp.Position == last
	}, waitLimit, 5*time.Millisecond, "the checkpoint never reached the last event")
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, 300, got.total(), "an event was handled twice without a crash")
}

func testParks[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 40, 0)
	got := newSeen()
	fail := newFailOn(5, 17)
	var flaky atomic.Int32 // item 9 fails twice, then succeeds: retries work
	handler := plainCounter(got, func(n int) error {
		if n == 9 && flaky.Add(1) <= 2 {
			return errors.New("flaky")
		}
		return fail.check(n)
	})
	c, err := projection.New("parks", st.Events, Registry(t), st.Consumers, handler,
		projection.Options{BatchSize: 8, Retry: fastRetry, Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(ctx))

	for n := range 40 {
		want := 1
		if n == 5 || n == 17 {
			want = 0
		}
		assert.Equal(t, want, got.count(n), "item %d", n)
	}
	cp, err := st.Consumers.Checkpoint(ctx, "parks")
	require.NoError(t, err)
	assert.Equal(t, lastPosition(t, st.Events), cp.Position, "parked events must not hold the checkpoint back")
	letters := collectLetters(t, c)
	require.Len(t, letters, 2)
	for i, n := range []uint64{5, 17} {
		d := letters[i]
		assert.Equal(t, "parks", d.Consumer)
		assert.Equal(t, "item-a", d.Event.StreamID)
		assert.Equal(t, n, d.Event.Version)
		assert.Equal(t, "ptest.item", d.Event.Type)
		assert.Equal(t, 0, d.Part)
		assert.Equal(t, 3, d.Attempts)
		assert.Contains(t, d.Error, itemKey(int(n)))
		assert.False(t, d.FirstFailure.IsZero())
		assert.False(t, d.LastFailure.Before(d.FirstFailure))
	}

	// A retry that fails again keeps the dead letter, one attempt more.
	err = c.RetryDeadLetter(ctx, letters[0].ID)
	var herr *projection.HandlerError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, uint64(5), herr.Version)
	d, err := st.Consumers.DeadLetter(ctx, "parks", letters[0].ID)
	require.NoError(t, err)
	assert.Equal(t, 4, d.Attempts)

	fail.on.Store(false)
	require.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	assert.Equal(t, 1, got.count(5), "a retried dead letter re-enters the handler")
	require.NoError(t, c.SkipDeadLetter(ctx, letters[1].ID))
	assert.Equal(t, 0, got.count(17), "a skipped dead letter is not handled")
	assert.Empty(t, collectLetters(t, c))
	assert.ErrorIs(t, c.RetryDeadLetter(ctx, letters[1].ID), eventstore.ErrDeadLetterNotFound)
	assert.ErrorIs(t, c.SkipDeadLetter(ctx, letters[1].ID), eventstore.ErrDeadLetterNotFound)
}

func testParksTx[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 40, 0)
	fail := newFailOn(5, 17)
	c, err := projection.NewTx("parks-tx", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 8, Retry: fastRetry, Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(ctx))
	for n := range 40 {
		want := int64(1)
		if n == 5 || n == 17 {
			want = 0
		}
		assert.Equal(t, want, h.Get(t, st, itemKey(n)), "item %d", n)
	}
	assert.Equal(t, int64(38), h.Get(t, st, totalKey))
	letters := collectLetters(t, c)
	require.Len(t, letters, 2)
	assert.Equal(t, uint64(5), letters[0].Event.Version)
	assert.Equal(t, 3, letters[0].Attempts)

	fail.on.Store(false)
	require.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	assert.Equal(t, int64(1), h.Get(t, st, itemKey(5)))
	assert.Equal(t, int64(39), h.Get(t, st, totalKey))
	require.NoError(t, c.SkipDeadLetter(ctx, letters[1].ID))
	assert.Equal(t, int64(0), h.Get(t, st, itemKey(17)))
	assert.Empty(t, collectLetters(t, c))
}

func testStops[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 20, 0)
	fail := newFailOn(7)
	c, err := projection.NewTx("stops", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 5, Retry: fastRetry, OnFailure: projection.Stop, Logger: quiet()})
	require.NoError(t, err)
	err = c.CatchUp(ctx)
	require.ErrorIs(t, err, projection.ErrHandlerFailed)
	var herr *projection.HandlerError
	require.ErrorAs(t, err, &herr)
	assert.Equal(t, "item-a", herr.Stream)
	assert.Equal(t, uint64(7), herr.Version)
	assert.Equal(t, "ptest.item", herr.Type)
	assert.Equal(t, 3, herr.Attempts)
	assert.Contains(t, err.Error(), `"item-a"`)
	assert.Equal(t, int64(7), h.Get(t, st, totalKey), "the events before the failing one are committed")
	assert.Equal(t, int64(0), h.Get(t, st, itemKey(8)))
	assert.Empty(t, collectLetters(t, c))

	fail.on.Store(false)
	require.NoError(t, c.CatchUp(ctx))
	for n := range 20 {
		assert.Equal(t, int64(1), h.Get(t, st, itemKey(n)), "item %d", n)
	}
}

func collectLetters(t testing.TB, c *projection.Consumer) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range c.DeadLetters(context.Background()) {
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// testStopsPlain: a plain consumer that stops keeps the progress of the
// events it handled before the failing one.
func testStopsPlain[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 20, 0)
	got := newSeen()
	fail := newFailOn(7)
	c, err := projection.New("stops-plain", st.Events, Registry(t), st.Consumers, plainCounter(got, fail.check),
		projection.Options{BatchSize: 5, Retry: fastRetry, OnFailure: projection.Stop, Logger: quiet()})
	require.NoError(t, err)
	var herr *projection.HandlerError
	require.ErrorAs(t, c.CatchUp(ctx), &herr)
	assert.Equal(t, uint64(7), herr.Version)
	assert.Equal(t, 7, got.len())
	fail.on.Store(false)
	require.NoError(t, c.CatchUp(ctx))
	for n := range 20 {
		assert.Equal(t, 1, got.count(n), "item %d", n)
	}
}
