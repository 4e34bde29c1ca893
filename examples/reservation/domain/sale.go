package domain

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// Sale is the state of one sale: the saga instance of one order.
type Sale struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
	Reserved    bool   `json:"reserved"`
	// Outcome is "" while the sale runs, then "confirmed" or
	// "rejected: <reason>".
	Outcome string `json:"outcome"`
}

// PaymentDue is the payload of the sale's payment deadline.
type PaymentDue struct {
	OrderID string `json:"order_id"`
}

// SaleOptions configure the Sale saga.
type SaleOptions struct {
	// PaymentWindow is how long the sale waits for the payment once the
	// seats are reserved; zero means 15 minutes.
	PaymentWindow time.Duration
}

// Outcomes of a sale, as Sale.Outcome records them.
const (
	OutcomeConfirmed = "confirmed"
	outcomeRejected  = "rejected: "
)

// RejectedOutcome is the outcome of a sale rejected for reason.
func RejectedOutcome(reason string) string { return outcomeRejected + reason }

// byOrder finds a sale by the order ID its events carry.
func byOrder[E any](id func(E) string) func(E, eventstore.Metadata) string {
	return func(e E, _ eventstore.Metadata) string { return id(e) }
}

// NewSale declares the Sale saga on reg, where the flow's types must be
// registered (see Register).
func NewSale(reg *codec.Registry, opts SaleOptions) (*saga.Type[Sale], error) {
	window := opts.PaymentWindow
	if window <= 0 {
		window = 15 * time.Minute
	}
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	if err != nil {
		return nil, err
	}
	// reject ends a sale: the order is rejected, and what was reserved or
	// asked for is given back.
	reject := func(s *Sale, out *saga.Output, reason string) {
		out.Send(RejectOrder{OrderID: s.OrderID, Reason: reason})
		if s.Reserved {
			out.Send(CancelReservation{OrderID: s.OrderID})
		}
		s.Outcome = RejectedOutcome(reason)
		out.Complete()
	}
	return sale, errors.Join(
		SendsTickets(sale),
		saga.On(sale, saga.Event[Sale, OrderPlaced]{
			Instance: byOrder(func(e OrderPlaced) string { return e.OrderID }),
			Starts:   true,
			Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
				s.OrderID, s.Customer, s.AmountCents = e.OrderID, e.Customer, e.AmountCents
				out.Send(MakeReservation{OrderID: e.OrderID, Customer: e.Customer, Seats: e.Seats})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, SeatsReserved]{
			Instance: byOrder(func(e SeatsReserved) string { return e.OrderID }),
			Handle: func(_ context.Context, s *Sale, e SeatsReserved, out *saga.Output) error {
				s.Reserved = true
				out.Send(MakePayment{OrderID: s.OrderID, Customer: s.Customer, AmountCents: s.AmountCents})
				out.ScheduleAfter("payment", window, PaymentDue{OrderID: s.OrderID})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, SeatsNotReserved]{
			Instance: byOrder(func(e SeatsNotReserved) string { return e.OrderID }),
			Handle: func(_ context.Context, s *Sale, _ SeatsNotReserved, out *saga.Output) error {
				reject(s, out, ReasonNoSeats)
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentAccepted]{
			Instance: byOrder(func(e PaymentAccepted) string { return e.OrderID }),
			Handle: func(_ context.Context, s *Sale, _ PaymentAccepted, out *saga.Output) error {
				out.Cancel("payment")
				out.Send(ConfirmOrder{OrderID: s.OrderID})
				s.Outcome = OutcomeConfirmed
				out.Complete()
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentCancelled]{
			Instance: byOrder(func(e PaymentCancelled) string { return e.OrderID }),
			Handle: func(_ context.Context, s *Sale, _ PaymentCancelled, out *saga.Output) error {
				reject(s, out, ReasonNoPayment)
				return nil
			},
		}),
		saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakePayment, _ error, out *saga.Output) error {
			reject(s, out, ReasonPaymentRefused)
			return nil
		}),
		// The window has ended: close the payment, unless it was taken. The
		// payment decides, so that a deadline that fires late (after a
		// restart, or behind a backlog) never beats a payment made in time.
		saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, _ PaymentDue, out *saga.Output) error {
			out.Send(CancelPayment{OrderID: s.OrderID, Customer: s.Customer})
			return nil
		}),
		// Refused: the payment was taken in time, and its PaymentAccepted
		// confirms the order.
		saga.OnRejected(sale, func(context.Context, *Sale, CancelPayment, error, *saga.Output) error { return nil }),
	)
}

// SendsTickets declares that sale, a sale of any version of the model,
// sends the commands of the orders and seat reservations: the part that
// every version keeps.
func SendsTickets[S any](sale *saga.Type[S]) error {
	return errors.Join(
		saga.Sends[S, MakeReservation](sale),
		saga.Sends[S, CancelReservation](sale),
		saga.Sends[S, ConfirmOrder](sale),
		saga.Sends[S, RejectOrder](sale),
	)
}
