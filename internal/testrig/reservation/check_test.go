package reservation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

func TestInputsDecideTheEnd(t *testing.T) {
	late := "no payment in time"
	for _, c := range []struct {
		name    string
		in      reservation.Inputs
		want    reservation.Outcome
		o, r, p int
	}{
		{"paid", reservation.Inputs{Seats: 2, AmountCents: 100},
			reservation.Outcome{Confirmed: true, Reserved: true, Paid: true}, 2, 1, 1},
		{"no seats", reservation.Inputs{Seats: domain.MaxSeats + 1, AmountCents: 100, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: "no seats"}, 2, 1, 0},
		{"refused", reservation.Inputs{Seats: 2, AmountCents: 1001},
			reservation.Outcome{Rejected: true, Reason: "payment: payment refused", Reserved: true, Cancelled: true}, 2, 2, 1},
		{"refused after the deadline", reservation.Inputs{Seats: 2, AmountCents: 1001, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"pending", reservation.Inputs{Seats: 2, AmountCents: 14},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"settled in time", reservation.Inputs{Seats: 2, AmountCents: 14, Settled: true},
			reservation.Outcome{Confirmed: true, Reserved: true}, 2, 1, 1},
		{"settled late", reservation.Inputs{Seats: 2, AmountCents: 14, Settled: true, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"paid after the deadline", reservation.Inputs{Seats: 2, AmountCents: 100, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, Paid: true, AfterDeadline: true}, 2, 2, 1},
	} {
		assert.Equal(t, c.want, c.in.Expect(), c.name)
		o, r, p := c.in.Events()
		assert.Equal(t, []int{c.o, c.r, c.p}, []int{o, r, p}, c.name)
	}
	assert.Equal(t, reservation.Inputs{Seats: 2, AmountCents: 14}.Expect(), reservation.Expect(2, 14), "Expect is the inputs without timing")
}

// flow is the reservation flow on a memory store, its sale run by hand.
type flow struct {
	store  *memory.Store
	reg    *codec.Registry
	bus    *command.Bus
	clock  *sagatest.Clock
	runner *saga.Runner[reservation.Sale]
}

func newFlow(t *testing.T) *flow {
	f := &flow{store: memory.New(), reg: codec.NewRegistry(codec.Options{}), clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { _ = f.store.Close() })
	require.NoError(t, reservation.Register(f.reg))
	f.bus = command.New(f.store, f.reg, command.Options{})
	require.NoError(t, reservation.Route(f.bus))
	sale, err := reservation.NewSale(f.reg)
	require.NoError(t, err)
	f.runner, err = saga.NewRunner(sale, f.store, f.bus, saga.RunnerOptions{Checkpoints: memory.New(), Clock: f.clock})
	require.NoError(t, err)
	return f
}

// place places order id and runs the sale until it has nothing to do.
func (f *flow) place(t *testing.T, id string, seats int, amountCents int64) {
	_, err := f.bus.Dispatch(context.Background(), command.Message{ID: "place-" + id,
		Command: domain.PlaceOrder{OrderID: id, Customer: "ada", Seats: seats, AmountCents: amountCents}})
	require.NoError(t, err)
	require.NoError(t, f.runner.CatchUp(context.Background()))
}

// Every way an order ends, run through the flow, reads back from its
// streams as Expect says: the example's orders and reservations, the
// rig's payments, and a payment refused, whose stream holds Cairn's record
// of the rejection.
func TestTheCheckerReadsEveryEndFromTheStreams(t *testing.T) {
	ctx := context.Background()
	f := newFlow(t)
	orders := map[string]reservation.Inputs{
		"paid":     {Seats: 2, AmountCents: 100},
		"no-seats": {Seats: domain.MaxSeats + 1, AmountCents: 100},
		"refused":  {Seats: 2, AmountCents: reservation.MaxAmountCents + 1},
		"pending":  {Seats: 2, AmountCents: 14},
	}
	for id, in := range orders {
		f.place(t, id, in.Seats, in.AmountCents)
	}
	check, err := reservation.NewChecker(f.store, f.reg)
	require.NoError(t, err)
	end, err := check.End(ctx, "pending")
	require.NoError(t, err)
	assert.Equal(t, reservation.End{Placed: true, Reserved: true, Pending: true}, end, "before its deadline")
	f.clock.Advance(reservation.PaymentWindow)
	require.NoError(t, f.runner.CatchUp(ctx))

	for id, in := range orders {
		problems, err := check.Check(ctx, id, in)
		require.NoError(t, err)
		assert.Empty(t, problems, id)
	}
	end, err = check.End(ctx, "refused")
	require.NoError(t, err)
	assert.Equal(t, reservation.End{Placed: true, Rejected: true, Reason: "payment: payment refused", Reserved: true, Cancelled: true}, end)
	end, err = check.End(ctx, "paid")
	require.NoError(t, err)
	assert.Equal(t, reservation.End{Placed: true, Confirmed: true, Reserved: true, Paid: true}, end)

	_, err = reservation.NewChecker(f.store, codec.NewRegistry(codec.Options{}))
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "a registry without the flow's types")
}

func TestCheckerFindsACommandThatTookEffectTwice(t *testing.T) {
	ctx := context.Background()
	f := newFlow(t)
	store := f.store
	f.place(t, "1", 2, 100)

	check, err := reservation.NewChecker(store, f.reg)
	require.NoError(t, err)
	in := reservation.Inputs{Seats: 2, AmountCents: 100}
	problems, err := check.Check(ctx, "1", in)
	require.NoError(t, err)
	assert.Empty(t, problems)
	problems, err = check.Check(ctx, "1", reservation.Inputs{Seats: 2, AmountCents: 1001})
	require.NoError(t, err)
	assert.Contains(t, strings.Join(problems, "\n"), "order confirmed is true, want false", "the wrong inputs")

	// The confirmation again, under its command ID: an effect applied twice.
	var confirmed eventstore.Event
	for ev, err := range store.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		confirmed = ev
	}
	again := confirmed.EventData
	again.ID = eventstore.NewEventID()
	_, err = store.Append(trusted.Writer(ctx), "order-1", eventstore.Any, again)
	require.NoError(t, err)
	problems, err = check.Check(ctx, "1", in)
	require.NoError(t, err)
	all := strings.Join(problems, "\n")
	assert.Contains(t, all, "a command took effect twice")
	assert.Contains(t, all, "order-1's number of events is 3, want 2")
}
