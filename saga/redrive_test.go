package saga_test

import (
	"context"
	"sync/atomic"
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

// redriveFixture runs a saga whose Note "pay" handler forgets to send the
// payment until the test fixes it: the bug a re-drive repairs.
type redriveFixture struct {
	store  *memory.Store
	runner *saga.Runner[Sale]
	repo   *aggregate.Repository[Order, *Order]
	clock  *sagatest.Clock
	fixed  atomic.Bool
	ran    atomic.Int64 // how many times the "pay" handler ran
}

func newRedriveFixture(t *testing.T) *redriveFixture {
	f := &redriveFixture{store: memory.New(), clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { _ = f.store.Close() })
	reg := testRegistry(t)
	sale, err := saga.New[Sale]("redo", reg, saga.Options[Sale]{})
	require.NoError(t, err)
	require.NoError(t, saga.Sends[Sale, MakeReservation](sale))
	require.NoError(t, saga.Sends[Sale, MakePayment](sale))
	require.NoError(t, saga.On(sale, saga.Event[Sale, OrderPlaced]{Instance: byOrder[OrderPlaced], Starts: true,
		Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
			s.OrderID = e.OrderID
			s.Seen = append(s.Seen, "placed")
			out.Send(MakeReservation(e))
			out.ScheduleAfter("payment", 15*time.Minute, PaymentDue{Reminder: 1})
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, Note]{Instance: byOrder[Note],
		Handle: func(_ context.Context, s *Sale, e Note, out *saga.Output) error {
			f.ran.Add(1)
			s.Seen = append(s.Seen, e.Text)
			if f.fixed.Load() {
				out.Send(MakePayment{OrderID: s.OrderID})
			}
			return nil
		}}))
	require.NoError(t, saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, p PaymentDue, out *saga.Output) error {
		s.Seen = append(s.Seen, "due")
		return nil
	}))
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(f.store, reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	require.NoError(t, command.Route[MakePayment](bus, orders))
	f.repo, err = aggregate.NewRepository(f.store, reg, orders, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	f.runner, err = saga.NewRunner(sale, f.store, bus, saga.RunnerOptions{Clock: f.clock, Logger: testLogger(t)})
	require.NoError(t, err)
	return f
}

func (f *redriveFixture) send(t *testing.T, id string) {
	t.Helper()
	require.NoError(t, f.runner.SendRecords(context.Background(), id))
}

func (f *redriveFixture) order(t *testing.T, id string) *Order {
	t.Helper()
	inst, err := f.repo.Load(context.Background(), id)
	require.NoError(t, err)
	return inst.State
}

func TestRedriveRunsAFixedHandlerAgainAndKeepsCommandIDs(t *testing.T) {
	f := newRedriveFixture(t)
	ctx := context.Background()
	for i, ev := range []any{OrderPlaced{OrderID: "1"}, Note{OrderID: "1", Text: "pay"}} {
		_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "order-1", Sequence: uint64(i), Event: ev})
		require.NoError(t, err)
	}
	f.send(t, "1")
	before, err := f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, 1, f.order(t, "1").Reserved)
	assert.Zero(t, f.order(t, "1").Paid, "the bug: the payment was never sent")

	f.fixed.Store(true)
	redriven, err := f.runner.Redrive(ctx, "1", 0)
	n := redriven.Messages
	require.NoError(t, err)
	assert.Equal(t, 2, n, "both events run again")
	f.send(t, "1")

	o := f.order(t, "1")
	assert.Equal(t, 1, o.Reserved, "the reservation the first run sent keeps its ID: the bus absorbs it")
	assert.Equal(t, 1, o.Paid, "the fixed handler's payment went out")
	x, err := f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "pay"}, x.State.Seen, "state is rebuilt from the step before, not added to")
	assert.Equal(t, map[string]uint64{"order-1": 1}, x.Watermarks)
	require.Len(t, x.Deadlines, 1)
	assert.Equal(t, before.Deadlines, x.Deadlines, "the deadline keeps its ID and time")

	var kinds []string
	for s, err := range f.runner.History(ctx, "1") {
		require.NoError(t, err)
		kinds = append(kinds, s.Kind)
	}
	assert.Equal(t, []string{"event", "event", "redriven", "event", "event"}, kinds)

	// A second re-drive from the second step runs one message, and sends
	// the payment again under its ID: still one payment.
	redriven, err = f.runner.Redrive(ctx, "1", 4)
	n = redriven.Messages
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	f.send(t, "1")
	assert.Equal(t, 1, f.order(t, "1").Paid)
	assert.EqualValues(t, 3, f.ran.Load())
}

func TestRedriveOfADeadlineStepFiresItAgainUnderItsID(t *testing.T) {
	f := newRedriveFixture(t)
	ctx := context.Background()
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "order-1", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	f.clock.Advance(time.Hour)
	fired, err := f.runner.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, fired)

	redriven, err := f.runner.Redrive(ctx, "1", 1)

	n := redriven.Messages
	require.NoError(t, err)
	assert.Zero(t, n, "a deadline is not a message to hold: it is pending again")
	x, err := f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	require.Len(t, x.Deadlines, 1, "pending again, as the step before left it")
	fired, err = f.runner.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fired, "overdue: it fires at once")
	x, err = f.runner.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "due"}, x.State.Seen)
}

func TestRedriveRefusesAVersionPastTheLatestStep(t *testing.T) {
	f := newRedriveFixture(t)
	ctx := context.Background()
	_, err := f.runner.Redrive(ctx, "none", 0)
	var bad *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &bad, "an instance with no steps")
	_, err = f.runner.Deliver(ctx, saga.Delivery{Source: "order-1", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	_, err = f.runner.Redrive(ctx, "1", 1)
	require.ErrorAs(t, err, &bad)
	assert.Contains(t, err.Error(), "past the latest step 0")
}
