package sagatest_test

import (
	"context"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The reservation flow of the examples: a sale reserves seats, takes a
// payment, and confirms; a refusal or no payment in 15 minutes rejects the
// order and releases the seats.
type (
	OrderPlaced      struct{ OrderID string }
	SeatsReserved    struct{ OrderID string }
	SeatsNotReserved struct{ OrderID string }
	PaymentAccepted  struct{ OrderID string }

	MakeReservation    struct{ OrderID string }
	CancelReservation  struct{ OrderID string }
	MakePayment        struct{ OrderID string }
	ConfirmOrder       struct{ OrderID string }
	RejectOrder        struct{ OrderID, Reason string }
	PaymentWindowEnded struct{}
)

func (c MakeReservation) AggregateID() string   { return c.OrderID }
func (c CancelReservation) AggregateID() string { return c.OrderID }
func (c MakePayment) AggregateID() string       { return c.OrderID }
func (c ConfirmOrder) AggregateID() string      { return c.OrderID }
func (c RejectOrder) AggregateID() string       { return c.OrderID }

// Sale is the saga's state.
type Sale struct {
	OrderID  string `json:"order_id"`
	Reserved bool   `json:"reserved"`
}

func registry() *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	for _, err := range []error{
		codec.Register[Sale](reg, "sale.state", 1),
		codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[SeatsReserved](reg, "seats.reserved", 1),
		codec.Register[SeatsNotReserved](reg, "seats.not-reserved", 1),
		codec.Register[PaymentAccepted](reg, "payment.accepted", 1),
		codec.Register[MakeReservation](reg, "make-reservation", 1),
		codec.Register[CancelReservation](reg, "cancel-reservation", 1),
		codec.Register[MakePayment](reg, "make-payment", 1),
		codec.Register[ConfirmOrder](reg, "confirm-order", 1),
		codec.Register[RejectOrder](reg, "reject-order", 1),
		codec.Register[PaymentWindowEnded](reg, "payment-window-ended", 1),
	} {
		if err != nil {
			panic(err)
		}
	}
	return reg
}

// saleSaga declares the sale on reg; paymentWindow is how long it waits
// for the payment.
func saleSaga(reg *codec.Registry, paymentWindow time.Duration) *saga.Type[Sale] {
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	must(err)
	order := func(id string) string { return id }
	must(saga.On(sale, saga.Event[Sale, OrderPlaced]{
		Instance: func(e OrderPlaced, _ eventstore.Metadata) string { return order(e.OrderID) },
		Starts:   true,
		Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
			s.OrderID = e.OrderID
			out.Send(MakeReservation(e))
			return nil
		},
	}))
	must(saga.On(sale, saga.Event[Sale, SeatsReserved]{
		Instance: func(e SeatsReserved, _ eventstore.Metadata) string { return order(e.OrderID) },
		Handle: func(_ context.Context, s *Sale, e SeatsReserved, out *saga.Output) error {
			s.Reserved = true
			out.Send(MakePayment(e))
			out.ScheduleAfter("payment", paymentWindow, PaymentWindowEnded{})
			return nil
		},
	}))
	must(saga.On(sale, saga.Event[Sale, SeatsNotReserved]{
		Instance: func(e SeatsNotReserved, _ eventstore.Metadata) string { return order(e.OrderID) },
		Handle: func(_ context.Context, s *Sale, e SeatsNotReserved, out *saga.Output) error {
			out.Send(RejectOrder{OrderID: e.OrderID, Reason: "no seats"})
			out.Complete()
			return nil
		},
	}))
	must(saga.On(sale, saga.Event[Sale, PaymentAccepted]{
		Instance: func(e PaymentAccepted, _ eventstore.Metadata) string { return order(e.OrderID) },
		Handle: func(_ context.Context, s *Sale, e PaymentAccepted, out *saga.Output) error {
			out.Cancel("payment")
			out.Send(ConfirmOrder(e))
			out.Complete()
			return nil
		},
	}))
	reject := func(s *Sale, out *saga.Output, reason string) {
		out.Send(RejectOrder{OrderID: s.OrderID, Reason: reason})
		if s.Reserved {
			out.Send(CancelReservation{OrderID: s.OrderID})
		}
		out.Complete()
	}
	must(saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, _ PaymentWindowEnded, out *saga.Output) error {
		reject(s, out, "no payment in time")
		return nil
	}))
	must(saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakePayment, reason error, out *saga.Output) error {
		reject(s, out, reason.Error())
		return nil
	}))
	for _, err := range []error{
		saga.Sends[Sale, MakeReservation](sale), saga.Sends[Sale, CancelReservation](sale),
		saga.Sends[Sale, ConfirmOrder](sale), saga.Sends[Sale, RejectOrder](sale),
	} {
		must(err)
	}
	return sale
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
