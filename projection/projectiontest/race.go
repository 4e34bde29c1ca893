package projectiontest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// testRacingWithoutLease runs two transactional consumers of one name at
// once without a lease (two deployments): each event counts once, and no
// batch's handler runs against a checkpoint the other consumer has moved,
// so neither does the other's work again (or meets the rows it wrote).
func testRacingWithoutLease[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	const events = 400
	appendItems(t, st.Events, "item-race", 0, events, 0)
	reg := Registry(t)
	var calls atomic.Int64
	count := countingTx(h, nil)
	handler := func(ctx context.Context, tx Tx, d codec.Decoded) error {
		calls.Add(1)
		return count(ctx, tx, d)
	}
	var wg sync.WaitGroup
	for range 2 {
		c, err := projection.NewTx("race", st.Events, reg, st.Consumers, handler,
			projection.Options{BatchSize: 7, Logger: quiet(), NoStatsLog: true})
		check.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A consumer that loses the race starts over from the stored
			// checkpoint; CatchUp returns its error, so go on until caught up.
			for {
				err := c.CatchUp(ctx)
				if err == nil {
					return
				}
				if !errors.Is(err, eventstore.ErrCheckpointMoved) && !errors.Is(err, eventstore.ErrFenced) {
					t.Errorf("catch up: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	check.Equal(t, h.Get(t, st, totalKey), int64(events), "each event counted once")
	check.Equal(t, calls.Load(), int64(events), "no handler ran on a batch the other consumer had committed")
}
