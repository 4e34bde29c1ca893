package projectiontest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// testResumeSplits resumes a consumer from every checkpoint of a stream in
// which every third event is split into two values by an upcaster: each
// run must see exactly the values after its checkpoint, in order.
func testResumeSplits[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 30, 3)
	reg := Registry(t)

	type stored struct {
		pos   eventstore.Position
		parts []uuid.UUID
	}
	var log []stored
	for e, err := range st.Events.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		check.NoError(t, err)
		ds, err := reg.Decode(e)
		check.NoError(t, err)
		s := stored{pos: e.Position}
		for _, d := range ds {
			s.parts = append(s.parts, d.PartID())
		}
		log = append(log, s)
	}
	check.Len(t, log, 30)
	check.Len(t, log[0].parts, 2, "event 0 is a split one")

	for k := -1; k < len(log); k++ {
		from := eventstore.Start
		if k >= 0 {
			from = log[k].pos
		}
		var want []uuid.UUID
		for _, s := range log[k+1:] {
			want = append(want, s.parts...)
		}
		name := fmt.Sprintf("resume-%d", k)
		check.NoError(t, st.Consumers.SaveCheckpoint(ctx, name, eventstore.Start, from, 0))
		var got []uuid.UUID
		c, err := projection.New(name, st.Events, reg, st.Consumers, func(ctx context.Context, d codec.Decoded) error {
			got = append(got, d.PartID())
			return nil
		}, projection.Options{BatchSize: 1 + k%4, Logger: quiet()})
		check.NoError(t, err)
		check.NoError(t, c.CatchUp(ctx))
		check.Equal(t, got, want, "resuming after event %d: gaps or repeats", k)
		cp, err := st.Consumers.Checkpoint(ctx, name)
		check.NoError(t, err)
		check.Equal(t, cp.Position, log[len(log)-1].pos)
	}
}

// testSplitFailureTx fails on the second value of a split event: only that
// value is parked; the first counts once, and retrying the dead letter
// handles only the second.
func testSplitFailureTx[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 12, 4) // items 0, 4, 8 are pairs
	fail := newFailOn(1_000_004)
	c, err := projection.NewTx("split-fail", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 5, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	check.Equal(t, h.Get(t, st, itemKey(4)), int64(1), "the first part of the failing event")
	check.Equal(t, h.Get(t, st, itemKey(1_000_004)), int64(0))
	check.Equal(t, h.Get(t, st, itemKey(1_000_008)), int64(1))
	check.Equal(t, h.Get(t, st, totalKey), int64(12+3-1))
	letters := collectLetters(t, c)
	check.Len(t, letters, 1)
	check.Equal(t, letters[0].Part, 1)
	check.Equal(t, letters[0].Event.Version, uint64(4))
	check.Equal(t, letters[0].Event.Type, "ptest.pair", "the dead letter keeps the event as stored")

	fail.on.Store(false)
	check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	check.Equal(t, h.Get(t, st, itemKey(4)), int64(1))
	check.Equal(t, h.Get(t, st, itemKey(1_000_004)), int64(1))
	check.Equal(t, h.Get(t, st, totalKey), int64(12+3))
}

// testInterruptedTx interrupts a transactional consumer at random values
// (mid-batch, mid-split), as a crash would, and restarts it until it is
// done: every value counts exactly once.
func testInterruptedTx[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	appendItems(t, st.Events, "item-a", 0, 300, 5)
	reg := Registry(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var restarts int
	for {
		ctx, cancel := context.WithCancelCause(context.Background())
		crash := errors.New("simulated crash")
		count := countingTx(h, nil)
		handler := func(ctx context.Context, tx Tx, d codec.Decoded) error {
			if err := count(ctx, tx, d); err != nil {
				return err
			}
			if rng.IntN(25) == 0 {
				cancel(crash)
				return crash
			}
			return nil
		}
		c, err := projection.NewTx("interrupted", st.Events, reg, st.Consumers, handler,
			projection.Options{BatchSize: 1 + rng.IntN(10), MaxBatchDelay: time.Millisecond, Retry: fastRetry, Logger: quiet()})
		check.NoError(t, err)
		err = c.CatchUp(ctx)
		cancel(nil)
		if err == nil {
			break
		}
		check.ErrorIs(t, err, context.Canceled)
		restarts++
		check.Less(t, restarts, 2000, "the consumer makes no progress")
	}
	t.Logf("%d interruptions", restarts)
	check.Less(t, 3, restarts, "the test interrupted too rarely to mean anything")
	check.Len(t, collectLettersOf(t, st, "interrupted"), 0, "an interruption was parked as a failure")
	for n := range 300 {
		check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
		if n%5 == 0 {
			check.Equal(t, h.Get(t, st, itemKey(n+1_000_000)), int64(1), "item %d's second part", n)
		}
	}
	check.Equal(t, h.Get(t, st, totalKey), int64(300+60))
}

func collectLettersOf[Tx any](t testing.TB, st Stores[Tx], consumer string) []eventstore.DeadLetter {
	t.Helper()
	var out []eventstore.DeadLetter
	for d, err := range st.Consumers.DeadLetters(context.Background(), consumer) {
		check.NoError(t, err)
		out = append(out, d)
	}
	return out
}
