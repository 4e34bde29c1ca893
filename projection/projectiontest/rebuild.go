package projectiontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

func testRebuild[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 100, 0)
	c, err := projection.NewTx("rebuilt", st.Events, Registry(t), st.Consumers, countingTx(h, nil),
		projection.Options{BatchSize: 16, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	check.Equal(t, h.Get(t, st, totalKey), int64(100))

	// The reset hook runs first; when it fails, nothing moves.
	boom := errors.New("cannot truncate")
	err = c.Rebuild(ctx, projection.RebuildOptions{Reset: func(context.Context) error { return boom }})
	check.ErrorIs(t, err, boom)
	cp, err := st.Consumers.Checkpoint(ctx, "rebuilt")
	check.NoError(t, err)
	check.Equal(t, cp.Position, lastPosition(t, st.Events))

	// Without a reset of the read model, a replay shows in the counts.
	var reports []projection.Progress
	reset := false
	check.NoError(t, c.Rebuild(ctx, projection.RebuildOptions{
		Reset:    func(context.Context) error { reset = true; return nil },
		Progress: func(p projection.Progress) { reports = append(reports, p) },
		Count:    true,
	}))
	check.True(t, reset)
	check.True(t, len(reports) > 0)
	for i, p := range reports {
		check.Equal(t, p.Total, uint64(100))
		if i > 0 {
			check.Less(t, reports[i-1].Done, p.Done, "progress goes forward")
		}
	}
	last := reports[len(reports)-1]
	check.Equal(t, last.Done, uint64(100))
	check.Less(t, 0, last.Rate)
	check.Equal(t, h.Get(t, st, itemKey(0)), int64(2))
	check.Equal(t, h.Get(t, st, totalKey), int64(200))

	// From a position: only the events after it are replayed.
	var at eventstore.Position
	for e, err := range st.Events.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		check.NoError(t, err)
		if e.Version == 49 {
			at = e.Position
		}
	}
	check.NoError(t, c.Rebuild(ctx, projection.RebuildOptions{From: at}))
	check.Equal(t, h.Get(t, st, itemKey(49)), int64(2))
	check.Equal(t, h.Get(t, st, itemKey(50)), int64(3))
	check.Equal(t, h.Get(t, st, totalKey), int64(250))
}

func testStats[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 50, 0)
	fail := newFailOn(3)
	c, err := projection.New("stats", st.Events, Registry(t), st.Consumers, plainCounter(newSeen(), fail.check),
		projection.Options{BatchSize: 8, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	s, err := c.Stats(ctx)
	check.NoError(t, err)
	check.Equal(t, s.Consumer, "stats")
	check.Equal(t, s.Handled, 0)
	check.NoError(t, c.CatchUp(ctx))
	s, err = c.Stats(ctx)
	check.NoError(t, err)
	last := lastPosition(t, st.Events)
	check.Equal(t, s.Checkpoint, last)
	check.Equal(t, s.Head, last)
	check.Equal(t, s.Handled, uint64(50))
	check.Equal(t, s.Pending, 0)
	check.Equal(t, s.TimeLag, time.Duration(0))
	check.Equal(t, s.Parked, 1)
	check.True(t, !s.Leader)
}

// testRebuildTx resets the read model in the checkpoint's transaction: an
// interrupted rebuild resumes by Run or CatchUp without double counting.
func testRebuildTx[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 60, 0)
	c, err := projection.NewTx("rebuilt-tx", st.Events, Registry(t), st.Consumers, countingTx(h, nil),
		projection.Options{BatchSize: 8, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
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
	check.ErrorIs(t, err, context.Canceled)
	check.Equal(t, h.Get(t, st, totalKey), int64(24), "the reset and three batches of the replay")
	// ...a catch-up finishes it, each event once.
	check.NoError(t, c.CatchUp(ctx))
	for n := range 60 {
		check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
	}
	check.Equal(t, h.Get(t, st, totalKey), int64(60))

	plain, err := projection.New("plain", st.Events, Registry(t), st.Consumers, plainCounter(newSeen(), nil), projection.Options{})
	check.NoError(t, err)
	check.ErrorIs(t, projection.RebuildTx(ctx, plain, reset, projection.RebuildOptions{}), eventstore.ErrInvalidArgument)
}
