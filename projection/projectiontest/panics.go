package projectiontest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// testHandlerPanics: a handler that panics on an event (a nil map, an
// index out of range) does not take the process down, at every restart:
// the panic is a [*projection.PanicError], retried like any failure, then
// parked (or returned, with Stop); the events after it are handled, and a
// retry of its dead letter that panics again keeps it. Plain and
// transactional consumers alike.
func testHandlerPanics[Tx any](t testing.TB, h Harness[Tx]) {
	for _, mode := range []string{"plain", "tx"} {
		check.Run(t, mode, func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			var panics atomic.Int32
			var panicking atomic.Bool
			panicking.Store(true)
			fail := func(n int) error {
				if n == 5 && panicking.Load() {
					panics.Add(1)
					var none []int
					_ = none[n] // index out of range
				}
				return nil
			}
			got := newSeen()
			build := func(name string, onFailure projection.FailureMode) *projection.Consumer {
				opts := projection.Options{BatchSize: 4, Retry: fastRetry, OnFailure: onFailure, Logger: quiet()}
				var c *projection.Consumer
				var err error
				if mode == "plain" {
					c, err = projection.New(name, st.Events, Registry(t), st.Consumers, plainCounter(got, fail), opts)
				} else {
					c, err = projection.NewTx(name, st.Events, Registry(t), st.Consumers, countingTx(h, fail), opts)
				}
				check.NoError(t, err)
				return c
			}
			count := counter(t, h, st, got, mode == "plain")

			// Stop: the panic is returned, typed, naming the event.
			err := build("panics-stop", projection.Stop).CatchUp(ctx)
			var herr *projection.HandlerError
			check.ErrorAs(t, err, &herr)
			check.Equal(t, herr.Version, uint64(5))
			check.Equal(t, herr.Attempts, fastRetry.Attempts, "a panic is retried like an error")
			var perr *projection.PanicError
			check.ErrorAs(t, err, &perr, "the handler's panic is a *projection.PanicError")
			check.ErrorIs(t, err, projection.ErrPanicked)
			check.Equal(t, perr.Stream, "item-a")
			check.Equal(t, perr.Version, uint64(5))
			check.True(t, len(perr.Stack) > 0)
			check.Contains(t, err.Error(), "index out of range")
			check.Equal(t, int(panics.Load()), fastRetry.Attempts)

			// Park: the events after it are handled; the dead letter says why.
			panics.Store(0)
			c := build("panics-park", projection.Park)
			check.NoError(t, c.CatchUp(ctx))
			check.Equal(t, int(panics.Load()), fastRetry.Attempts)
			letters := collectLetters(t, c)
			check.Len(t, letters, 1)
			check.Equal(t, letters[0].Event.Version, uint64(5))
			check.Contains(t, letters[0].Error, "panicked")
			for _, n := range []int{4, 6, 9} {
				check.Less(t, 0, count(n), "item %d after the panicking one", n)
			}

			// A retry that panics again keeps the dead letter; once fixed, it
			// applies.
			err = c.RetryDeadLetter(ctx, letters[0].ID)
			check.ErrorAs(t, err, &perr)
			check.Len(t, collectLetters(t, c), 1)
			panicking.Store(false)
			check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
			check.Less(t, 0, count(5))
			check.Len(t, collectLetters(t, c), 0)
		})
	}
}
