package projectiontest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/projection"
)

// testHandlerPanics: a handler that panics on an event (a nil map, an
// index out of range) does not take the process down, at every restart:
// the panic is a [*projection.PanicError], retried like any failure, then
// parked (or returned, with Stop); the events after it are handled, and a
// retry of its dead letter that panics again keeps it. Plain and
// transactional consumers alike.
func testHandlerPanics[Tx any](t *testing.T, h Harness[Tx]) {
	for _, mode := range []string{"plain", "tx"} {
		t.Run(mode, func(t *testing.T) {
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
				require.NoError(t, err)
				return c
			}
			count := counter(t, h, st, got, mode == "plain")

			// Stop: the panic is returned, typed, naming the event.
			err := build("panics-stop", projection.Stop).CatchUp(ctx)
			var herr *projection.HandlerError
			require.ErrorAs(t, err, &herr)
			assert.Equal(t, uint64(5), herr.Version)
			assert.Equal(t, fastRetry.Attempts, herr.Attempts, "a panic is retried like an error")
			var perr *projection.PanicError
			require.ErrorAs(t, err, &perr, "the handler's panic is a *projection.PanicError")
			assert.ErrorIs(t, err, projection.ErrPanicked)
			assert.Equal(t, "item-a", perr.Stream)
			assert.Equal(t, uint64(5), perr.Version)
			assert.NotEmpty(t, perr.Stack)
			assert.Contains(t, err.Error(), "index out of range")
			assert.EqualValues(t, fastRetry.Attempts, panics.Load())

			// Park: the events after it are handled; the dead letter says why.
			panics.Store(0)
			c := build("panics-park", projection.Park)
			require.NoError(t, c.CatchUp(ctx))
			assert.EqualValues(t, fastRetry.Attempts, panics.Load())
			letters := collectLetters(t, c)
			require.Len(t, letters, 1)
			assert.Equal(t, uint64(5), letters[0].Event.Version)
			assert.Contains(t, letters[0].Error, "panicked")
			for _, n := range []int{4, 6, 9} {
				assert.Positive(t, count(n), "item %d after the panicking one", n)
			}

			// A retry that panics again keeps the dead letter; once fixed, it
			// applies.
			err = c.RetryDeadLetter(ctx, letters[0].ID)
			require.ErrorAs(t, err, &perr)
			assert.Len(t, collectLetters(t, c), 1)
			panicking.Store(false)
			require.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
			assert.Positive(t, count(5))
			assert.Empty(t, collectLetters(t, c))
		})
	}
}
