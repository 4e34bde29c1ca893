// Package reservation is the reservation flow that Cairn's saga tests,
// simulation, soak and crash tests run. The order and the seat
// reservation are the reservation example's, written once there
// (examples/reservation/domain: its Order and SeatReservation aggregates,
// their commands and events, registered by domain.RegisterTickets and
// routed by domain.RouteTickets). What exists only for testing is here: a
// Payment aggregate, a Sale saga over it, and the prediction and check of
// every order's end. The aggregates never handle each other's events; the
// sale coordinates them.
//
//	OrderPlaced                      -> MakeReservation
//	SeatsReserved                    -> MakePayment, and a payment deadline
//	SeatsNotReserved                 -> RejectOrder
//	PaymentAccepted                  -> ConfirmOrder
//	MakePayment rejected, or no
//	payment before the deadline      -> RejectOrder + CancelReservation
//
// A payment that Payment leaves pending may be settled by the payment
// provider, outside the store: its PaymentAuthorized and PaymentAccepted
// reach the sale through saga.Runner.Deliver, numbered 0 and 1 for the
// order, in any order.
//
// What happens to an order follows from its [Inputs] (see [Expect] and
// [Checker]), so a test can check every order's end whatever faults it
// injected.
package reservation

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/saga"
)

// Rules of the flow; the most seats a reservation gets is the example's
// domain.MaxSeats.
const (
	// MaxAmountCents is the largest payment accepted: more is rejected.
	MaxAmountCents = 1000
	// PaymentWindow is how long the sale waits for a payment.
	PaymentWindow = 15 * time.Minute
)

// MakePayment is the sale asking for an order's payment.
type MakePayment struct {
	OrderID     string
	AmountCents int64
}

// AggregateID implements command.Command.
func (c MakePayment) AggregateID() string { return c.OrderID }

// Events of the payment.
type (
	PaymentAccepted struct {
		OrderID     string
		AmountCents int64
	}
	// PaymentPending is a payment that Payment does not complete: the
	// payment provider may settle it (PaymentAuthorized, then
	// PaymentAccepted, delivered from outside the store); otherwise the
	// sale's deadline ends it.
	PaymentPending struct{ OrderID string }
	// PaymentAuthorized is the payment provider's first word on a pending
	// payment; it comes from outside the store.
	PaymentAuthorized struct{ OrderID string }
)

// ErrPaymentRefused is the Payment aggregate's rejection of an amount above
// MaxAmountCents.
var ErrPaymentRefused = errors.New("payment refused")

// Payment is the payment aggregate of one order.
type Payment struct{ accepted, pending bool }

// pay decides: amounts above MaxAmountCents are refused (a rejection the
// sale compensates), amounts divisible by 7 stay pending forever (the
// sale's deadline ends them), the others are accepted.
func (p *Payment) pay(_ context.Context, c MakePayment) ([]any, error) {
	switch {
	case p.accepted || p.pending:
		return nil, nil
	case c.AmountCents > MaxAmountCents:
		return nil, ErrPaymentRefused
	case c.AmountCents%7 == 0:
		return []any{PaymentPending{OrderID: c.OrderID}}, nil
	}
	return []any{PaymentAccepted(c)}, nil
}

func (p *Payment) paid(PaymentAccepted)       { p.accepted = true }
func (p *Payment) leftPending(PaymentPending) { p.pending = true }

// Sale is the saga's state.
type Sale struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Reserved    bool   `json:"reserved"`
	// Authorized says the payment provider authorized the payment.
	Authorized bool `json:"authorized,omitempty"`
}

// Register registers every type of the flow with reg: the example's
// orders, seat reservations and payment deadline (domain.RegisterTickets),
// and this package's payment and sale under names of their own, for the
// example's full model (domain.Register) gives "payment.accepted",
// "payment.authorized" and "sale.state" to its own, other types.
func Register(reg *codec.Registry) error {
	return errors.Join(
		domain.RegisterTickets(reg),
		// The example's model never names PlaceOrder, which no saga sends;
		// named, the bus records it with the order's events, as it does
		// every other command of the flow, and refuses its command ID
		// reused for another command (command.CommandIDReusedError).
		codec.Register[domain.PlaceOrder](reg, "reservation.place-order", 1),
		codec.Register[MakePayment](reg, "reservation.make-payment", 1),
		codec.Register[PaymentAccepted](reg, "rig-payment.accepted", 1),
		codec.Register[PaymentPending](reg, "rig-payment.pending", 1),
		codec.Register[PaymentAuthorized](reg, "rig-payment.authorized", 1),
		codec.Register[Sale](reg, "rig-sale.state", 1),
	)
}

// Payments is the payment aggregate type: its streams are
// "payment-<order ID>".
var Payments = func() *aggregate.Type[Payment, *Payment] {
	t, err := aggregate.NewType[Payment]("payment", aggregate.Options[Payment]{},
		aggregate.Handles((*Payment).pay), aggregate.Applies((*Payment).paid), aggregate.Applies((*Payment).leftPending))
	if err != nil {
		panic(err) // a constant name: a bug, caught by any test
	}
	return t
}()

// Route routes every command of the flow on bus.
func Route(bus *command.Bus) error {
	return errors.Join(
		domain.RouteTickets(bus),
		command.Route[MakePayment](bus, Payments),
	)
}

// NewSale declares the Sale saga on reg.
func NewSale(reg *codec.Registry) (*saga.Type[Sale], error) {
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	if err != nil {
		return nil, err
	}
	byOrder := func(id string) string { return id }
	reject := func(s *Sale, out *saga.Output, reason string) {
		out.Send(domain.RejectOrder{OrderID: s.OrderID, Reason: reason})
		if s.Reserved {
			out.Send(domain.CancelReservation{OrderID: s.OrderID})
		}
		out.Complete()
	}
	return sale, errors.Join(
		domain.SendsTickets(sale),
		saga.On(sale, saga.Event[Sale, domain.OrderPlaced]{
			Instance: func(e domain.OrderPlaced, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Starts:   true,
			Handle: func(_ context.Context, s *Sale, e domain.OrderPlaced, out *saga.Output) error {
				s.OrderID, s.AmountCents = e.OrderID, e.AmountCents
				out.Send(domain.MakeReservation{OrderID: e.OrderID, Customer: e.Customer, Seats: e.Seats})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, domain.SeatsReserved]{
			Instance: func(e domain.SeatsReserved, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, e domain.SeatsReserved, out *saga.Output) error {
				s.Reserved = true
				out.Send(MakePayment{OrderID: e.OrderID, AmountCents: s.AmountCents})
				out.ScheduleAfter("payment", PaymentWindow, domain.PaymentDue{OrderID: e.OrderID})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, domain.SeatsNotReserved]{
			Instance: func(e domain.SeatsNotReserved, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, _ domain.SeatsNotReserved, out *saga.Output) error {
				reject(s, out, domain.ReasonNoSeats)
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentAccepted]{
			Instance: func(e PaymentAccepted, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, e PaymentAccepted, out *saga.Output) error {
				out.Cancel("payment")
				out.Send(domain.ConfirmOrder{OrderID: e.OrderID})
				out.Complete()
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentAuthorized]{
			Instance: func(e PaymentAuthorized, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, _ PaymentAuthorized, _ *saga.Output) error {
				s.Authorized = true
				return nil
			},
		}),
		// The reason carries the refusal's text, so that the checks see it
		// came through the recorded rejection whole.
		saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakePayment, reason error, out *saga.Output) error {
			reject(s, out, refusedReason(reason))
			return nil
		}),
		// Unlike the example's sale, which asks its payment to close, the
		// deadline rejects the order at once: the payment goes on without
		// the sale (see [Inputs.Expect]).
		saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, _ domain.PaymentDue, out *saga.Output) error {
			reject(s, out, domain.ReasonNoPayment)
			return nil
		}),
	)
}

// refusedReason is the reason of an order whose payment was refused for
// err.
func refusedReason(err error) string { return "payment: " + err.Error() }

// Inputs decide how an order ends: the order itself, whether the payment
// provider settles a payment that Payment leaves pending, and whether the
// sale's payment deadline fired before the payment's outcome reached the
// sale, which the clock decides rather than the order.
type Inputs struct {
	Seats       int
	AmountCents int64
	// Settled says the payment provider accepts a payment that Payment
	// leaves pending (see [Inputs.Pending]); its PaymentAccepted reaches
	// the sale from outside the store.
	Settled bool
	// TimedOut says the payment deadline fired before the payment's outcome
	// (accepted, or refused) reached the sale. A pending payment that is
	// not settled always times out.
	TimedOut bool
}

// Pending reports whether Payment leaves the order's payment pending:
// amounts divisible by 7, up to MaxAmountCents.
func (in Inputs) Pending() bool { return in.AmountCents <= MaxAmountCents && in.AmountCents%7 == 0 }

// Outcome is how an order ends.
type Outcome struct {
	Confirmed, Rejected bool
	Reason              string
	// Reserved and Cancelled are the reservation's end.
	Reserved, Cancelled bool
	// Paid says the Payment aggregate accepted the payment (one that the
	// provider settles stays pending there).
	Paid bool
	// AfterDeadline says the outcome needs the payment deadline to fire.
	AfterDeadline bool
}

// Expect returns how an order placed with seats and amountCents ends when
// its payment, unless it stays pending, reaches the sale before the
// deadline.
func Expect(seats int, amountCents int64) Outcome {
	return Inputs{Seats: seats, AmountCents: amountCents}.Expect()
}

// Expect returns how the order ends.
func (in Inputs) Expect() Outcome {
	switch {
	case in.Seats > domain.MaxSeats:
		return Outcome{Rejected: true, Reason: domain.ReasonNoSeats}
	case in.TimedOut || in.Pending() && !in.Settled:
		// The payment goes on without the sale: Payment accepts what it
		// would have accepted, after the order was rejected.
		return Outcome{Rejected: true, Reason: domain.ReasonNoPayment, Reserved: true, Cancelled: true,
			Paid: in.AmountCents <= MaxAmountCents && !in.Pending(), AfterDeadline: true}
	case in.AmountCents > MaxAmountCents:
		return Outcome{Rejected: true, Reason: refusedReason(ErrPaymentRefused), Reserved: true, Cancelled: true}
	}
	return Outcome{Confirmed: true, Reserved: true, Paid: !in.Pending()}
}

// Events returns how many events the order's, the reservation's and the
// payment's streams hold once an order placed with seats and amountCents
// has ended (see [Expect]): each command of the flow took effect exactly
// once.
func Events(seats int, amountCents int64) (order, reservation, payment int) {
	return Inputs{Seats: seats, AmountCents: amountCents}.Events()
}

// Events returns how many events the order's, the reservation's and the
// payment's streams hold once the order has ended. Once the seats are
// reserved the payment's stream holds one event whatever happens: the
// payment accepted, left pending, or refused, for the saga's outbox has the
// bus record a rejection there (aggregate.RejectionType), so that it is
// final; the payment is asked for even after the deadline rejected the
// order.
func (in Inputs) Events() (order, reservation, payment int) {
	if in.Seats > domain.MaxSeats {
		return 2, 1, 0
	}
	if in.Expect().Cancelled {
		return 2, 2, 1
	}
	return 2, 1, 1
}
