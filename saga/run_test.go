package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// flow is the test saga running end to end on a memory store: its commands
// go through a bus to Order aggregates, whose events come back to it.
type flow struct {
	store     *memory.Store
	consumers *memory.Store
	reg       *codec.Registry
	runner    *saga.Runner[Sale]
	repo      *aggregate.Repository[Order, *Order]
	clock     *sagatest.Clock
}

func newFlow(t *testing.T) *flow {
	f := &flow{store: memory.New(), consumers: memory.New(), clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { _ = f.store.Close() })
	f.reg = testRegistry(t)
	sale := saleType(t, f.reg)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(f.store, f.reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	require.NoError(t, command.Route[MakePayment](bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](bus, orders))
	f.repo, err = aggregate.NewRepository(f.store, f.reg, orders, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	f.runner, err = saga.NewRunner(sale, f.store, bus, saga.RunnerOptions{
		Checkpoints: f.consumers, Clock: f.clock, Logger: testLogger(t), Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond},
	})
	require.NoError(t, err)
	return f
}

// place stores an OrderPlaced event, as the order's own command would.
func (f *flow) place(t *testing.T, id string) {
	t.Helper()
	data, err := f.reg.Encode(OrderPlaced{OrderID: id})
	require.NoError(t, err)
	_, err = f.store.Append(context.Background(), "order-"+id, eventstore.NoStream, data)
	require.NoError(t, err)
}

func (f *flow) order(t *testing.T, id string) *Order {
	t.Helper()
	inst, err := f.repo.Load(context.Background(), id)
	require.NoError(t, err)
	return inst.State
}

func TestCatchUpRunsTheFlowToTheEnd(t *testing.T) {
	f := newFlow(t)
	ctx := context.Background()
	for _, id := range []string{"1", "2", "soldout3"} {
		f.place(t, id)
	}
	require.NoError(t, f.runner.CatchUp(ctx))

	for _, id := range []string{"1", "2"} {
		assert.Equal(t, &Order{Reserved: 1, Paid: 1, Confirmed: 1}, f.order(t, id), "order %s", id)
		x, err := f.runner.Explain(ctx, id)
		require.NoError(t, err)
		assert.True(t, x.Completed, "order %s", id)
		assert.Equal(t, []string{"placed", "reserved", "paid"}, x.State.Seen, "order %s", id)
		assert.Empty(t, x.Deadlines, "the payment deadline was cancelled")
	}
	x, err := f.runner.Explain(ctx, "soldout3")
	require.NoError(t, err)
	assert.False(t, x.Completed, "no rejection handler in this saga: the instance waits for its deadline")
	require.Len(t, x.Deadlines, 1)

	f.clock.Advance(15 * time.Minute)
	require.NoError(t, f.runner.CatchUp(ctx))
	x, err = f.runner.Explain(ctx, "soldout3")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "due1"}, x.State.Seen, "the deadline fired once")

	// Everything stored was handled: another catch-up changes nothing.
	before := len(f.history(t, "1"))
	require.NoError(t, f.runner.CatchUp(ctx))
	assert.Len(t, f.history(t, "1"), before)
}

func (f *flow) history(t *testing.T, id string) []saga.Step {
	t.Helper()
	var out []saga.Step
	for s, err := range f.runner.History(context.Background(), id) {
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

func TestRunHandlesLiveEventsAndDeadlines(t *testing.T) {
	f := newFlow(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.runner.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	f.place(t, "live")
	require.Eventually(t, func() bool {
		x, err := f.runner.Explain(context.Background(), "live")
		inst, lerr := f.repo.Load(context.Background(), "live")
		return err == nil && lerr == nil && x.Completed && inst.State.Confirmed == 1
	}, 30*time.Second, 5*time.Millisecond, "the flow completes while the runner runs")
	assert.Equal(t, &Order{Reserved: 1, Paid: 1, Confirmed: 1}, f.order(t, "live"))

	// A deadline set while running fires when it is due.
	f.place(t, "soldout-live")
	require.Eventually(t, func() bool {
		x, err := f.runner.Explain(context.Background(), "soldout-live")
		return err == nil && len(x.Deadlines) == 1
	}, 30*time.Second, 5*time.Millisecond)
	f.clock.Advance(15 * time.Minute)
	require.Eventually(t, func() bool {
		x, err := f.runner.Explain(context.Background(), "soldout-live")
		return err == nil && len(x.State.Seen) == 2 && x.State.Seen[1] == "due1"
	}, 30*time.Second, 5*time.Millisecond, "the deadline fires")
}

// Run returns nil however its context ends, and whenever: a process asked
// to stop while its runner is still starting (the subscription check reads
// the store) has not failed, nor has one whose context had a deadline.
func TestRunReturnsNilWhenItsContextEnds(t *testing.T) {
	f := newFlow(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, f.runner.Run(ended), "a context that ended before Run started")

	timed, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	require.NoError(t, f.runner.Run(timed), "a context whose deadline passed while Run ran")

	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("the process is shutting down"))
	require.NoError(t, f.runner.Run(caused), "a context cancelled with a cause of its caller's")

	// Then it starts and runs as before.
	f.place(t, "after")
	require.NoError(t, f.runner.CatchUp(context.Background()))
	assert.Equal(t, &Order{Reserved: 1, Paid: 1, Confirmed: 1}, f.order(t, "after"))
}

func TestAnEventThatReachesNoInstanceIsParkedAndTheOthersGoOn(t *testing.T) {
	f := newFlow(t)
	ctx := context.Background()
	data, err := f.reg.Encode(Note{OrderID: ""})
	require.NoError(t, err)
	_, err = f.store.Append(ctx, "notes-x", eventstore.NoStream, data)
	require.NoError(t, err)
	f.place(t, "after")
	require.NoError(t, f.runner.CatchUp(ctx))
	assert.Equal(t, &Order{Reserved: 1, Paid: 1, Confirmed: 1}, f.order(t, "after"))
	n, err := f.consumers.CountDeadLetters(ctx, eventsConsumer(f.runner))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	for d, err := range f.consumers.DeadLetters(ctx, eventsConsumer(f.runner)) {
		require.NoError(t, err)
		assert.Equal(t, "notes-x", d.Event.StreamID)
		assert.Contains(t, d.Error, "empty instance ID")
	}
}

func TestExplainNamesTheCommandsTheOutboxHasNotSent(t *testing.T) {
	f := newFlow(t)
	ctx := context.Background()
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "order-1", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	x, err := f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	require.Len(t, x.Unsent, 1, "recorded, and no outbox has run")
	assert.Equal(t, MakeReservation{OrderID: "1"}, x.Unsent[0].Command)
	assert.Equal(t, x.LastStep.Commands[0].ID, x.Unsent[0].ID)
	assert.Zero(t, f.order(t, "1").Reserved)

	require.NoError(t, f.runner.CatchUp(ctx))
	x, err = f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Empty(t, x.Unsent, "the outbox passed every step")
	assert.Equal(t, 1, f.order(t, "1").Reserved)
}
