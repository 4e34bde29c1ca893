// Package reservation is the reservation flow that Cairn's saga tests,
// benchmarks and crash tests run: Order, Seats and Payment aggregates,
// which never handle each other's events, coordinated by a Sale saga.
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
	"github.com/cairn-es/cairn/saga"
)

// Rules of the flow.
const (
	// MaxSeats is the most seats a reservation gets: more is refused.
	MaxSeats = 10
	// MaxAmount is the largest payment accepted: more is rejected.
	MaxAmount = 1000
	// PaymentWindow is how long the sale waits for a payment.
	PaymentWindow = 15 * time.Minute
)

// Commands.
type (
	PlaceOrder struct {
		OrderID       string
		Seats, Amount int
	}
	ConfirmOrder    struct{ OrderID string }
	RejectOrder     struct{ OrderID, Reason string }
	MakeReservation struct {
		OrderID string
		Seats   int
	}
	CancelReservation struct{ OrderID string }
	MakePayment       struct {
		OrderID string
		Amount  int
	}
)

// AggregateID implements command.Command.
func (c PlaceOrder) AggregateID() string        { return c.OrderID }
func (c ConfirmOrder) AggregateID() string      { return c.OrderID }
func (c RejectOrder) AggregateID() string       { return c.OrderID }
func (c MakeReservation) AggregateID() string   { return c.OrderID }
func (c CancelReservation) AggregateID() string { return c.OrderID }
func (c MakePayment) AggregateID() string       { return c.OrderID }

// Events.
type (
	OrderPlaced struct {
		OrderID       string
		Seats, Amount int
	}
	OrderConfirmed struct{ OrderID string }
	OrderRejected  struct{ OrderID, Reason string }
	SeatsReserved  struct {
		OrderID string
		Seats   int
	}
	SeatsNotReserved     struct{ OrderID string }
	ReservationCancelled struct{ OrderID string }
	PaymentAccepted      struct {
		OrderID string
		Amount  int
	}
	// PaymentPending is a payment that Payment does not complete: the
	// payment provider may settle it (PaymentAuthorized, then
	// PaymentAccepted, delivered from outside the store); otherwise the
	// sale's deadline ends it.
	PaymentPending struct{ OrderID string }
	// PaymentAuthorized is the payment provider's first word on a pending
	// payment; it comes from outside the store.
	PaymentAuthorized struct{ OrderID string }
	// PaymentDue is the payment deadline's payload.
	PaymentDue struct{ OrderID string }
)

// ErrPaymentRefused is the Payment aggregate's rejection of an amount above
// MaxAmount; ErrNotPlaced and ErrFinal refuse commands for an order in the
// wrong state.
var (
	ErrPaymentRefused = errors.New("payment refused")
	ErrNotPlaced      = errors.New("order not placed")
	ErrFinal          = errors.New("order already final")
)

// Order is the order aggregate.
type Order struct {
	Placed, Confirmed, Rejected bool
	Reason                      string
}

func (o *Order) place(_ context.Context, c PlaceOrder) ([]any, error) {
	if o.Placed {
		return nil, nil
	}
	return []any{OrderPlaced(c)}, nil
}

func (o *Order) confirm(_ context.Context, c ConfirmOrder) ([]any, error) {
	switch {
	case !o.Placed:
		return nil, ErrNotPlaced
	case o.Rejected:
		return nil, ErrFinal
	case o.Confirmed:
		return nil, nil
	}
	return []any{OrderConfirmed(c)}, nil
}

func (o *Order) reject(_ context.Context, c RejectOrder) ([]any, error) {
	switch {
	case !o.Placed:
		return nil, ErrNotPlaced
	case o.Confirmed:
		return nil, ErrFinal
	case o.Rejected:
		return nil, nil
	}
	return []any{OrderRejected(c)}, nil
}

func (o *Order) placed(OrderPlaced)       { o.Placed = true }
func (o *Order) confirmed(OrderConfirmed) { o.Confirmed = true }
func (o *Order) rejected(e OrderRejected) { o.Rejected, o.Reason = true, e.Reason }

// Seats is the reservation aggregate of one order.
type Seats struct {
	Reserved, Refused, Cancelled bool
}

func (s *Seats) reserve(_ context.Context, c MakeReservation) ([]any, error) {
	switch {
	case s.Reserved || s.Refused:
		return nil, nil
	case c.Seats > MaxSeats:
		return []any{SeatsNotReserved{OrderID: c.OrderID}}, nil
	}
	return []any{SeatsReserved(c)}, nil
}

func (s *Seats) cancel(_ context.Context, c CancelReservation) ([]any, error) {
	if !s.Reserved || s.Cancelled {
		return nil, nil
	}
	return []any{ReservationCancelled(c)}, nil
}

func (s *Seats) reserved(SeatsReserved)         { s.Reserved = true }
func (s *Seats) refused(SeatsNotReserved)       { s.Refused = true }
func (s *Seats) cancelled(ReservationCancelled) { s.Cancelled = true }

// Payment is the payment aggregate of one order.
type Payment struct{ Accepted, Pending bool }

// pay decides: amounts above MaxAmount are refused (a rejection the sale
// compensates), amounts divisible by 7 stay pending forever (the sale's
// deadline ends them), the others are accepted.
func (p *Payment) pay(_ context.Context, c MakePayment) ([]any, error) {
	switch {
	case p.Accepted || p.Pending:
		return nil, nil
	case c.Amount > MaxAmount:
		return nil, ErrPaymentRefused
	case c.Amount%7 == 0:
		return []any{PaymentPending{OrderID: c.OrderID}}, nil
	}
	return []any{PaymentAccepted(c)}, nil
}

func (p *Payment) accepted(PaymentAccepted) { p.Accepted = true }
func (p *Payment) pending(PaymentPending)   { p.Pending = true }

// Sale is the saga's state.
type Sale struct {
	OrderID  string `json:"order_id"`
	Amount   int    `json:"amount"`
	Reserved bool   `json:"reserved"`
	// Authorized says the payment provider authorized the payment.
	Authorized bool `json:"authorized,omitempty"`
}

// Register registers every type of the flow with reg.
func Register(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[PlaceOrder](reg, "reservation.place-order", 1),
		codec.Register[ConfirmOrder](reg, "reservation.confirm-order", 1),
		codec.Register[RejectOrder](reg, "reservation.reject-order", 1),
		codec.Register[MakeReservation](reg, "reservation.make-reservation", 1),
		codec.Register[CancelReservation](reg, "reservation.cancel-reservation", 1),
		codec.Register[MakePayment](reg, "reservation.make-payment", 1),
		codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[OrderConfirmed](reg, "order.confirmed", 1),
		codec.Register[OrderRejected](reg, "order.rejected", 1),
		codec.Register[SeatsReserved](reg, "seats.reserved", 1),
		codec.Register[SeatsNotReserved](reg, "seats.not-reserved", 1),
		codec.Register[ReservationCancelled](reg, "seats.cancelled", 1),
		codec.Register[PaymentAccepted](reg, "payment.accepted", 1),
		codec.Register[PaymentPending](reg, "payment.pending", 1),
		codec.Register[PaymentAuthorized](reg, "payment.authorized", 1),
		codec.Register[PaymentDue](reg, "sale.payment-due", 1),
		codec.Register[Sale](reg, "sale.state", 1),
	)
}

// Aggregate types of the flow.
var (
	Orders = mustType[Order]("order",
		aggregate.Handles((*Order).place), aggregate.Handles((*Order).confirm), aggregate.Handles((*Order).reject),
		aggregate.Applies((*Order).placed), aggregate.Applies((*Order).confirmed), aggregate.Applies((*Order).rejected))
	Reserves = mustType[Seats]("seats",
		aggregate.Handles((*Seats).reserve), aggregate.Handles((*Seats).cancel),
		aggregate.Applies((*Seats).reserved), aggregate.Applies((*Seats).refused), aggregate.Applies((*Seats).cancelled))
	Payments = mustType[Payment]("payment",
		aggregate.Handles((*Payment).pay),
		aggregate.Applies((*Payment).accepted), aggregate.Applies((*Payment).pending))
)

func mustType[T any, PT aggregate.Root[T]](name string, bindings ...aggregate.Binding[T]) *aggregate.Type[T, PT] {
	t, err := aggregate.NewType[T, PT](name, aggregate.Options[T]{}, bindings...)
	if err != nil {
		panic(err)
	}
	return t
}

// Route routes every command of the flow on bus.
func Route(bus *command.Bus) error {
	return errors.Join(
		command.Route[PlaceOrder](bus, Orders),
		command.Route[ConfirmOrder](bus, Orders),
		command.Route[RejectOrder](bus, Orders),
		command.Route[MakeReservation](bus, Reserves),
		command.Route[CancelReservation](bus, Reserves),
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
		out.Send(RejectOrder{OrderID: s.OrderID, Reason: reason})
		if s.Reserved {
			out.Send(CancelReservation{OrderID: s.OrderID})
		}
		out.Complete()
	}
	return sale, errors.Join(
		saga.Sends[Sale, MakeReservation](sale),
		saga.Sends[Sale, CancelReservation](sale),
		saga.Sends[Sale, ConfirmOrder](sale),
		saga.Sends[Sale, RejectOrder](sale),
		saga.On(sale, saga.Event[Sale, OrderPlaced]{
			Instance: func(e OrderPlaced, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Starts:   true,
			Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
				s.OrderID, s.Amount = e.OrderID, e.Amount
				out.Send(MakeReservation{OrderID: e.OrderID, Seats: e.Seats})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, SeatsReserved]{
			Instance: func(e SeatsReserved, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, e SeatsReserved, out *saga.Output) error {
				s.Reserved = true
				out.Send(MakePayment{OrderID: e.OrderID, Amount: s.Amount})
				out.ScheduleAfter("payment", PaymentWindow, PaymentDue{OrderID: e.OrderID})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, SeatsNotReserved]{
			Instance: func(e SeatsNotReserved, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, _ SeatsNotReserved, out *saga.Output) error {
				reject(s, out, "no seats")
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentAccepted]{
			Instance: func(e PaymentAccepted, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, e PaymentAccepted, out *saga.Output) error {
				out.Cancel("payment")
				out.Send(ConfirmOrder{OrderID: e.OrderID})
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
		saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakePayment, reason error, out *saga.Output) error {
			reject(s, out, "payment: "+reason.Error())
			return nil
		}),
		saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, _ PaymentDue, out *saga.Output) error {
			reject(s, out, "no payment in time")
			return nil
		}),
	)
}

// Inputs decide how an order ends: the order itself, whether the payment
// provider settles a payment that Payment leaves pending, and whether the
// sale's payment deadline fired before the payment's outcome reached the
// sale, which the clock decides rather than the order.
type Inputs struct {
	Seats, Amount int
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
// amounts divisible by 7, up to MaxAmount.
func (in Inputs) Pending() bool { return in.Amount <= MaxAmount && in.Amount%7 == 0 }

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

// Expect returns how an order placed with seats and amount ends when its
// payment, unless it stays pending, reaches the sale before the deadline.
func Expect(seats, amount int) Outcome { return Inputs{Seats: seats, Amount: amount}.Expect() }

// Expect returns how the order ends.
func (in Inputs) Expect() Outcome {
	switch {
	case in.Seats > MaxSeats:
		return Outcome{Rejected: true, Reason: "no seats"}
	case in.TimedOut || in.Pending() && !in.Settled:
		// The payment goes on without the sale: Payment accepts what it
		// would have accepted, after the order was rejected.
		return Outcome{Rejected: true, Reason: "no payment in time", Reserved: true, Cancelled: true,
			Paid: in.Amount <= MaxAmount && !in.Pending(), AfterDeadline: true}
	case in.Amount > MaxAmount:
		return Outcome{Rejected: true, Reason: "payment: " + ErrPaymentRefused.Error(), Reserved: true, Cancelled: true}
	}
	return Outcome{Confirmed: true, Reserved: true, Paid: !in.Pending()}
}

// Events returns how many events the order's, the reservation's and the
// payment's streams hold once an order placed with seats and amount has
// ended (see [Expect]): each command of the flow took effect exactly once.
func Events(seats, amount int) (order, reservation, payment int) {
	return Inputs{Seats: seats, Amount: amount}.Events()
}

// Events returns how many events the order's, the reservation's and the
// payment's streams hold once the order has ended. Once the seats are
// reserved the payment's stream holds one event whatever happens: the
// payment accepted, left pending, or refused, for the saga's outbox has the
// bus record a rejection there (aggregate.RejectionType), so that it is
// final; the payment is asked for even after the deadline rejected the
// order.
func (in Inputs) Events() (order, reservation, payment int) {
	if in.Seats > MaxSeats {
		return 2, 1, 0
	}
	if in.Expect().Cancelled {
		return 2, 2, 1
	}
	return 2, 1, 1
}
