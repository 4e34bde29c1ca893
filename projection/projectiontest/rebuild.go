package projectiontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/projection"
)

func testRebuild[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 100, 0)
	c, err := projection.NewTx("rebuilt", st.Events, Registry(t), st.Consumers, countingTx(h, nil),
		projection.Options{BatchSize: 16, Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(ctx))
	require.Equal(t, int64(100), h.Get(t, st, totalKey))

	// The reset hook runs first; when it fails, nothing moves.
	boom := errors.New("cannot truncate")
	err = c.Rebuild(ctx, projection.RebuildOptions{Reset: func(context.Context) error { return boom }})
	require.ErrorIs(t, err, boom)
	cp, err := st.Consumers.Checkpoint(ctx, "rebuilt")
	require.NoError(t, err)
	require.Equal(t, lastPosition(t, st.Events), cp.Position)

	// Without a reset of the read model, a replay shows in the counts.
	var reports []projection.Progress
	reset := false
	require.NoError(t, c.Rebuild(ctx, projection.RebuildOptions{
		Reset:    func(context.Context) error { reset = true; return nil },
		Progress: func(p projection.Progress) { reports = append(reports, p) },
		Count:    true,
	}))
	assert.True(t, reset)
	require.NotEmpty(t, reports)
	for i, p := range reports {
		assert.Equal(t, uint64(100), p.Total)
		if i > 0 {
			assert.Greater(t, p.Done, reports[i-1].Done, "progress goes forward")
		}
	}
	last := reports[len(reports)-1]
	assert.Equal(t, uint64(100), last.Done)
	assert.Positive(t, last.Rate)
	assert.Equal(t, int64(2), h.Get(t, st, itemKey(0)))
	assert.Equal(t, int64(200), h.Get(t, st, totalKey))

	// From a position: only the events after it are replayed.
	var at eventstore.Position
	for e, err := range st.Events.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		if e.Version == 49 {
			at = e.Position
		}
	}
	require.NoError(t, c.Rebuild(ctx, projection.RebuildOptions{From: at}))
	assert.Equal(t, int64(2), h.Get(t, st, itemKey(49)))
	assert.Equal(t, int64(3), h.Get(t, st, itemKey(50)))
	assert.Equal(t, int64(250), h.Get(t, st, totalKey))
}

func testStats[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 50, 0)
	fail := newFailOn(3)
	c, err := projection.New("stats", st.Events, Registry(t), st.Consumers, plainCounter(newSeen(), fail.check),
		projection.Options{BatchSize: 8, Retry: fastRetry, Logger: quiet()})
	require.NoError(t, err)
	s, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, "stats", s.Consumer)
	assert.Zero(t, s.Handled)
	require.NoError(t, c.CatchUp(ctx))
	s, err = c.Stats(ctx)
	require.NoError(t, err)
	last := lastPosition(t, st.Events)
	assert.Equal(t, last, s.Checkpoint)
	assert.Equal(t, last, s.Head)
	assert.Equal(t, uint64(50), s.Handled)
	assert.Zero(t, s.Pending)
	assert.Equal(t, time.Duration(0), s.TimeLag)
	assert.Equal(t, 1, s.Parked)
	assert.False(t, s.Leader)
}

// testRebuildTx resets the read model in the checkpoint's transaction: an
// interrupted rebuild resumes by Run or CatchUp without double counting.
func testRebuildTx[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 60, 0)
	c, err := projection.NewTx("rebuilt-tx", st.Events, Registry(t), st.Consumers, countingTx(h, nil),
		projection.Options{BatchSize: 8, Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(ctx))
	reset := func(ctx context.Context, tx Tx) error {
		for n := range 60 {
			if err := h.Add(ctx, tx, itemKey(n), -h.Get(t, st, itemKey(n))); err != nil {
				return err
			}
		}
		return h.Add(ctx, tx, totalKey, -h.Get(t, st, totalKey))
	}

	// Interrupted after a few batches of the replay...
	rctx, cancel := context.WithCancel(ctx)
	batches := 0
	err = projection.RebuildTx(rctx, c, reset, projection.RebuildOptions{Progress: func(projection.Progress) {
		if batches++; batches == 3 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(24), h.Get(t, st, totalKey), "the reset and three batches of the replay")
	// ...a catch-up finishes it, each event once.
	require.NoError(t, c.CatchUp(ctx))
	for n := range 60 {
		require.Equal(t, int64(1), h.Get(t, st, itemKey(n)), "item %d", n)
	}
	assert.Equal(t, int64(60), h.Get(t, st, totalKey))

	plain, err := projection.New("plain", st.Events, Registry(t), st.Consumers, plainCounter(newSeen(), nil), projection.Options{})
	require.NoError(t, err)
	assert.ErrorIs(t, projection.RebuildTx(ctx, plain, reset, projection.RebuildOptions{}), eventstore.ErrInvalidArgument)
}
