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
		{"paid", reservation.Inputs{Seats: 2, Amount: 100},
			reservation.Outcome{Confirmed: true, Reserved: true, Paid: true}, 2, 1, 1},
		{"no seats", reservation.Inputs{Seats: 11, Amount: 100, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: "no seats"}, 2, 1, 0},
		{"refused", reservation.Inputs{Seats: 2, Amount: 1001},
			reservation.Outcome{Rejected: true, Reason: "payment: payment refused", Reserved: true, Cancelled: true}, 2, 2, 1},
		{"refused after the deadline", reservation.Inputs{Seats: 2, Amount: 1001, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"pending", reservation.Inputs{Seats: 2, Amount: 14},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"settled in time", reservation.Inputs{Seats: 2, Amount: 14, Settled: true},
			reservation.Outcome{Confirmed: true, Reserved: true}, 2, 1, 1},
		{"settled late", reservation.Inputs{Seats: 2, Amount: 14, Settled: true, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, AfterDeadline: true}, 2, 2, 1},
		{"paid after the deadline", reservation.Inputs{Seats: 2, Amount: 100, TimedOut: true},
			reservation.Outcome{Rejected: true, Reason: late, Reserved: true, Cancelled: true, Paid: true, AfterDeadline: true}, 2, 2, 1},
	} {
		assert.Equal(t, c.want, c.in.Expect(), c.name)
		o, r, p := c.in.Events()
		assert.Equal(t, []int{c.o, c.r, c.p}, []int{o, r, p}, c.name)
	}
	assert.Equal(t, reservation.Inputs{Seats: 2, Amount: 14}.Expect(), reservation.Expect(2, 14), "Expect is the inputs without timing")
}

func TestCheckerFindsACommandThatTookEffectTwice(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, reservation.Register(reg))
	bus := command.New(store, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	sale, err := reservation.NewSale(reg)
	require.NoError(t, err)
	r, err := saga.NewRunner(sale, store, bus, saga.RunnerOptions{Checkpoints: memory.New(),
		Clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))})
	require.NoError(t, err)
	_, err = bus.Dispatch(ctx, command.Message{ID: "place-1", Command: reservation.PlaceOrder{OrderID: "1", Seats: 2, Amount: 100}})
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))

	check, err := reservation.NewChecker(store, reg)
	require.NoError(t, err)
	in := reservation.Inputs{Seats: 2, Amount: 100}
	problems, err := check.Check(ctx, "1", in)
	require.NoError(t, err)
	assert.Empty(t, problems)
	problems, err = check.Check(ctx, "1", reservation.Inputs{Seats: 2, Amount: 1001})
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
