package projectiontest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
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
		check.NoError(t, err)
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

func testCatchUpAndLive[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	appendItems(t, st.Events, "item-a", 0, 250, 0)
	got := newSeen()
	c, err := projection.New("live", st.Events, Registry(t), st.Consumers, plainCounter(got, nil),
		projection.Options{BatchSize: 32, MaxBatchDelay: 5 * time.Millisecond, Logger: quiet()})
	check.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	check.Eventually(t, func() bool { return got.len() == 250 }, waitLimit, 5*time.Millisecond)
	appendItems(t, st.Events, "item-b", 250, 50, 0)
	check.Eventually(t, func() bool { return got.len() == 300 }, waitLimit, 5*time.Millisecond)
	last := lastPosition(t, st.Events)
	check.Eventually(t, func() bool {
		cp, err := st.Consumers.Checkpoint(ctx, "live")
		return err == nil && cp.Position == last
	}, waitLimit, 5*time.Millisecond, "the checkpoint never reached the last event")
	cancel()
	check.NoError(t, <-done)
	check.Equal(t, got.total(), 300, "an event was handled twice without a crash")
}

func testParks[Tx any](t testing.TB, h Harness[Tx]) {
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
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))

	for n := range 40 {
		want := 1
		if n == 5 || n == 17 {
			want = 0
		}
		check.Equal(t, got.count(n), want, "item %d", n)
	}
	cp, err := st.Consumers.Checkpoint(ctx, "parks")
	check.NoError(t, err)
	check.Equal(t, cp.Position, lastPosition(t, st.Events), "parked events must not hold the checkpoint back")
	letters := collectLetters(t, c)
	check.Len(t, letters, 2)
	for i, n := range []uint64{5, 17} {
		d := letters[i]
		check.Equal(t, d.Consumer, "parks")
		check.Equal(t, d.Event.StreamID, "item-a")
		check.Equal(t, d.Event.Version, n)
		check.Equal(t, d.Event.Type, "ptest.item")
		check.Equal(t, d.Part, 0)
		check.Equal(t, d.Attempts, 3)
		check.Contains(t, d.Error, itemKey(int(n)))
		check.True(t, !d.FirstFailure.IsZero())
		check.True(t, !d.LastFailure.Before(d.FirstFailure))
	}

	// A retry that fails again keeps the dead letter, one attempt more.
	err = c.RetryDeadLetter(ctx, letters[0].ID)
	var herr *projection.HandlerError
	check.ErrorAs(t, err, &herr)
	check.Equal(t, herr.Version, uint64(5))
	d, err := st.Consumers.DeadLetter(ctx, "parks", letters[0].ID)
	check.NoError(t, err)
	check.Equal(t, d.Attempts, 4)

	fail.on.Store(false)
	check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	check.Equal(t, got.count(5), 1, "a retried dead letter re-enters the handler")
	check.NoError(t, c.SkipDeadLetter(ctx, letters[1].ID))
	check.Equal(t, got.count(17), 0, "a skipped dead letter is not handled")
	check.Len(t, collectLetters(t, c), 0)
	check.ErrorIs(t, c.RetryDeadLetter(ctx, letters[1].ID), eventstore.ErrDeadLetterNotFound)
	check.ErrorIs(t, c.SkipDeadLetter(ctx, letters[1].ID), eventstore.ErrDeadLetterNotFound)
}

func testParksTx[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 40, 0)
	fail := newFailOn(5, 17)
	c, err := projection.NewTx("parks-tx", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 8, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	for n := range 40 {
		want := int64(1)
		if n == 5 || n == 17 {
			want = 0
		}
		check.Equal(t, h.Get(t, st, itemKey(n)), want, "item %d", n)
	}
	check.Equal(t, h.Get(t, st, totalKey), int64(38))
	letters := collectLetters(t, c)
	check.Len(t, letters, 2, "dead letters of items 5 and 17")
	check.Equal(t, letters[0].Event.Version, uint64(5))
	check.Equal(t, letters[0].Attempts, 3)

	fail.on.Store(false)
	check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1))
	check.Equal(t, h.Get(t, st, totalKey), int64(39))
	check.NoError(t, c.SkipDeadLetter(ctx, letters[1].ID))
	check.Equal(t, h.Get(t, st, itemKey(17)), int64(0))
	check.Len(t, collectLetters(t, c), 0)
}

func testStops[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 20, 0)
	fail := newFailOn(7)
	c, err := projection.NewTx("stops", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 5, Retry: fastRetry, OnFailure: projection.Stop, Logger: quiet()})
	check.NoError(t, err)
	err = c.CatchUp(ctx)
	check.ErrorIs(t, err, projection.ErrHandlerFailed)
	var herr *projection.HandlerError
	check.ErrorAs(t, err, &herr)
	check.Equal(t, herr.Stream, "item-a")
	check.Equal(t, herr.Version, uint64(7))
	check.Equal(t, herr.Type, "ptest.item")
	check.Equal(t, herr.Attempts, 3)
	check.Contains(t, err.Error(), `"item-a"`)
	check.Equal(t, h.Get(t, st, totalKey), int64(7), "the events before the failing one are committed")
	check.Equal(t, h.Get(t, st, itemKey(8)), int64(0))
	check.Len(t, collectLetters(t, c), 0)

	fail.on.Store(false)
	check.NoError(t, c.CatchUp(ctx))
	for n := range 20 {
		check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
	}
}

func collectLetters(t testing.TB, c *projection.Consumer) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range c.DeadLetters(context.Background()) {
		check.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// testStopsPlain: a plain consumer that stops keeps the progress of the
// events it handled before the failing one.
func testStopsPlain[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 20, 0)
	got := newSeen()
	fail := newFailOn(7)
	c, err := projection.New("stops-plain", st.Events, Registry(t), st.Consumers, plainCounter(got, fail.check),
		projection.Options{BatchSize: 5, Retry: fastRetry, OnFailure: projection.Stop, Logger: quiet()})
	check.NoError(t, err)
	var herr *projection.HandlerError
	check.ErrorAs(t, c.CatchUp(ctx), &herr)
	check.Equal(t, herr.Version, uint64(7))
	check.Equal(t, got.len(), 7)
	fail.on.Store(false)
	check.NoError(t, c.CatchUp(ctx))
	for n := range 20 {
		check.Equal(t, got.count(n), 1, "item %d", n)
	}
}
