package projection_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
	"github.com/cairn-es/cairn/retry"
)

// TestBatchHandlerPanicsAreRetried: a batch handler's panic (a saga
// engine's bug) is a failure of the batch like an error: retried, and once
// the attempts are spent, returned as a *HandlerError holding the
// *PanicError; the process goes on.
func TestBatchHandlerPanicsAreRetried(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	appendN(t, store, "a-1", 3)
	var calls, left atomic.Int32
	left.Store(2)
	c, err := batchconsumer.New[*projection.Consumer]("batch-panics", store, memory.New(), func(_ context.Context, evs []eventstore.Event) error {
		calls.Add(1)
		if left.Add(-1) >= 0 {
			panic("batch handler bug")
		}
		return nil
	}, nil, projection.Options{Retry: retry.Policy{Attempts: 3, Initial: time.Millisecond}, Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()), "two panics, then the third attempt succeeds")
	assert.EqualValues(t, 3, calls.Load())

	appendN(t, store, "a-1", 1)
	left.Store(10)
	err = c.CatchUp(context.Background())
	var perr *projection.PanicError
	require.ErrorAs(t, err, &perr)
	require.ErrorIs(t, err, projection.ErrHandlerFailed)
	assert.Equal(t, "batch-panics", perr.Consumer)
	assert.Equal(t, "batch handler bug", perr.Value)
}

// TestCallbackPanicsAreErrors: a panic in the other user code a consumer
// calls (OnClaim, a rebuild's Reset and Progress) ends the call with a
// *PanicError naming the callback, instead of the process.
func TestCallbackPanicsAreErrors(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	appendN(t, store, "a-1", 2)
	noop := func(context.Context, codec.Decoded) error { return nil }
	reg := projectiontest.Registry(t)
	ctx := context.Background()
	opts := projection.Options{Logger: discard()}
	plain := func() (*projection.Consumer, error) {
		return projection.New("callbacks", store, reg, memory.New(), noop, opts)
	}
	for _, tc := range []struct {
		what string
		run  func(c *projection.Consumer) error
		make func() (*projection.Consumer, error)
	}{
		{"OnClaim", func(c *projection.Consumer) error { return c.CatchUp(ctx) }, func() (*projection.Consumer, error) {
			return batchconsumer.New[*projection.Consumer]("callbacks", store, memory.New(),
				func(context.Context, []eventstore.Event) error { return nil },
				func(context.Context, eventstore.Position) error { panic("claim bug") }, opts)
		}},
		{"Reset", func(c *projection.Consumer) error {
			return c.Rebuild(ctx, projection.RebuildOptions{Reset: func(context.Context) error { panic("reset bug") }})
		}, plain},
		{"Progress", func(c *projection.Consumer) error {
			return c.Rebuild(ctx, projection.RebuildOptions{Progress: func(projection.Progress) { panic("progress bug") }})
		}, plain},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c, err := tc.make()
			require.NoError(t, err)
			err = tc.run(c)
			var perr *projection.PanicError
			require.ErrorAs(t, err, &perr)
			assert.Equal(t, tc.what, perr.Func)
			assert.Equal(t, "callbacks", perr.Consumer)
			assert.Contains(t, err.Error(), "bug")
		})
	}
}
