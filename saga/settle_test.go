package saga_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// laggingStore is a memory store whose reads of the log start late: a
// runner that restarts behind a backlog.
type laggingStore struct {
	*memory.Store
	lag time.Duration
}

func (s laggingStore) Subscribe(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	time.Sleep(s.lag)
	return s.Store.Subscribe(ctx, after, f)
}

func (s laggingStore) ReadAll(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	time.Sleep(s.lag)
	return s.Store.ReadAll(ctx, after, f)
}

// TestADeadlineNeverOvertakesAnEventStoredBeforeIt: the payment is stored
// before the payment deadline falls due, and the runner, down until after
// it, comes back behind. The payment completes the sale and cancels the
// deadline; the deadline's handler never runs.
func TestADeadlineNeverOvertakesAnEventStoredBeforeIt(t *testing.T) {
	ctx := context.Background()
	clock := sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	consumers := memory.New()
	reg := testRegistry(t)
	sale := saleType(t, reg)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(store, reg, command.Options{})
	for _, route := range []error{command.Route[MakeReservation](bus, orders), command.Route[MakePayment](bus, orders), command.Route[ConfirmOrder](bus, orders)} {
		require.NoError(t, route)
	}
	newRunner := func(s eventstore.Store) *saga.Runner[Sale] {
		r, err := saga.NewRunner(sale, s, bus, saga.RunnerOptions{Checkpoints: consumers, Clock: clock, Logger: testLogger(t)})
		require.NoError(t, err)
		return r
	}

	// Before the outage: the order is placed, its step sets the deadline.
	_, err = newRunner(store).Deliver(ctx, saga.Delivery{Source: "orders", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	// During it: the payment arrives, in time.
	data, err := reg.Encode(PaymentAccepted{OrderID: "1"})
	require.NoError(t, err)
	_, err = store.Append(ctx, "payment-1", eventstore.NoStream, data)
	require.NoError(t, err)
	clock.Advance(time.Hour)

	r := newRunner(laggingStore{Store: store, lag: 50 * time.Millisecond})
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(run) }()
	require.Eventually(t, func() bool {
		x, err := r.Explain(ctx, "1")
		return err == nil && x.Completed
	}, 10*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // room for a deadline that would fire late
	stop()
	require.NoError(t, <-done)
	x, err := r.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "paid"}, x.State.Seen, "the payment came first; the deadline never fired")
}
