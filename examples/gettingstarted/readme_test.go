package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/saga"
)

// The types of the README's sample.
type (
	PlaceOrder struct {
		OrderID string
		Seats   int
	}
	OrderPlaced struct {
		OrderID string
		Seats   int
	}
	MakeReservation struct {
		OrderID string
		Seats   int
	}
	Sale       struct{ OrderID string }
	PaymentDue struct{ OrderID string }
	Seats      struct{}
)

func (c PlaceOrder) AggregateID() string      { return c.OrderID }
func (c MakeReservation) AggregateID() string { return c.OrderID }

func (s *Seats) Reserve(context.Context, MakeReservation) ([]any, error) { return nil, nil }

var ErrAlreadyPlaced = errors.New("order already placed")

// The README's sample, verbatim from "type Order" on.
type Order struct{ placed bool }

func (o *Order) Place(_ context.Context, c PlaceOrder) ([]any, error) {
	if o.placed {
		return nil, ErrAlreadyPlaced
	}
	return []any{OrderPlaced(c)}, nil
}

func (o *Order) Placed(OrderPlaced) { o.placed = true }

func wire(store eventstore.Store, reg *codec.Registry, bus *command.Bus) (*saga.Runner[Sale], error) {
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{},
		aggregate.Handles((*Order).Place),
		aggregate.Applies((*Order).Placed),
	)
	if err != nil {
		return nil, err
	}
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		command.Route[PlaceOrder](bus, orders),
		saga.Sends[Sale, MakeReservation](sale),
		saga.On(sale, saga.Event[Sale, OrderPlaced]{
			Instance: func(e OrderPlaced, _ eventstore.Metadata) string { return e.OrderID },
			Starts:   true,
			Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
				out.Send(MakeReservation(e))
				out.ScheduleAfter("payment", 15*time.Minute, PaymentDue{OrderID: e.OrderID})
				return nil
			},
		}),
		saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, p PaymentDue, out *saga.Output) error {
			return nil // cancel the reservation, reject the order...
		}),
	)
	if err != nil {
		return nil, err
	}
	runner, err := saga.NewRunner(sale, store, bus, saga.RunnerOptions{})
	return runner, err
}

// TestTheREADMESampleRuns wires the sample on SQLite and sends it an order:
// the saga sends the reservation, once.
func TestTheREADMESampleRuns(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(
		codec.Register[PlaceOrder](reg, "order.place", 1), codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[MakeReservation](reg, "seats.reserve", 1), codec.Register[Sale](reg, "sale.state", 1),
		codec.Register[PaymentDue](reg, "sale.payment_due", 1)))
	bus := command.New(store, reg, command.Options{})
	seats, err := aggregate.NewType[Seats]("seats", aggregate.Options[Seats]{}, aggregate.Handles((*Seats).Reserve))
	require.NoError(t, err)
	require.NoError(t, command.Route[MakeReservation](bus, seats))
	runner, err := wire(store, reg, bus)
	require.NoError(t, err, "the sample's set-up is right")
	_, err = bus.Dispatch(ctx, command.Message{ID: "m1", Command: PlaceOrder{OrderID: "o1", Seats: 2}})
	require.NoError(t, err)
	require.NoError(t, runner.CatchUp(ctx))
	n := 0
	for ev, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"saga:sale-"}}) {
		require.NoError(t, err)
		assert.Equal(t, "saga:sale-o1", ev.StreamID)
		n++
	}
	assert.Equal(t, 1, n, "one step of the sale")
}
