package v2

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/saga"
)

// Sale is version 2's sale state. Version 1's (domain.Sale) is read as
// this through the upcaster in upcast.go: Customer became Account, and the
// Reserved flag and the Outcome became one Stage.
type Sale struct {
	OrderID     string `json:"order_id"`
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	Stage       string `json:"stage"`
}

// The stages of a sale, as Sale.Stage records them; a rejected sale's is
// domain.RejectedOutcome(reason).
const (
	StageReserving = "reserving"
	StagePaying    = "paying"
	StageConfirmed = domain.OutcomeConfirmed
)

// NewSale declares version 2 of the Sale saga on reg, where the types of
// this version must be registered (see Register). It keeps version 1's
// name, so that it takes over version 1's instances and checkpoints.
func NewSale(reg *codec.Registry, opts domain.SaleOptions) (*saga.Type[Sale], error) {
	window := opts.PaymentWindow
	if window <= 0 {
		window = 15 * time.Minute
	}
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	if err != nil {
		return nil, err
	}
	byOrder := func(id string) string { return id }
	reject := func(s *Sale, out *saga.Output, reason string) {
		out.Send(domain.RejectOrder{OrderID: s.OrderID, Reason: reason})
		if s.Stage == StagePaying {
			out.Send(domain.CancelReservation{OrderID: s.OrderID})
		}
		s.Stage = domain.RejectedOutcome(reason)
		out.Complete()
	}
	return sale, errors.Join(
		domain.SendsTickets(sale),
		saga.On(sale, saga.Event[Sale, domain.OrderPlaced]{
			Instance: func(e domain.OrderPlaced, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Starts:   true,
			Handle: func(_ context.Context, s *Sale, e domain.OrderPlaced, out *saga.Output) error {
				*s = Sale{OrderID: e.OrderID, Account: e.Customer, AmountCents: e.AmountCents, Stage: StageReserving}
				out.Send(domain.MakeReservation{OrderID: e.OrderID, Customer: e.Customer, Seats: e.Seats})
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, domain.SeatsReserved]{
			Instance: func(e domain.SeatsReserved, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, _ domain.SeatsReserved, out *saga.Output) error {
				s.Stage = StagePaying
				out.Send(MakePayment{Account: s.Account, OrderID: s.OrderID, AmountCents: s.AmountCents, Currency: Currency})
				out.ScheduleAfter("payment", window, domain.PaymentDue{OrderID: s.OrderID})
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
			Handle: func(_ context.Context, s *Sale, _ PaymentAccepted, out *saga.Output) error {
				out.Cancel("payment")
				out.Send(domain.ConfirmOrder{OrderID: s.OrderID})
				s.Stage = StageConfirmed
				out.Complete()
				return nil
			},
		}),
		saga.On(sale, saga.Event[Sale, PaymentCancelled]{
			Instance: func(e PaymentCancelled, _ eventstore.Metadata) string { return byOrder(e.OrderID) },
			Handle: func(_ context.Context, s *Sale, _ PaymentCancelled, out *saga.Output) error {
				reject(s, out, domain.ReasonNoPayment)
				return nil
			},
		}),
		saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakePayment, _ error, out *saga.Output) error {
			reject(s, out, domain.ReasonPaymentRefused)
			return nil
		}),
		// As in version 1: the window's end closes the payment, unless the
		// payment was taken in time (then Finance refuses, and the
		// PaymentAccepted confirms the order).
		saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, _ domain.PaymentDue, out *saga.Output) error {
			out.Send(CancelPayment{Account: s.Account, OrderID: s.OrderID})
			return nil
		}),
		saga.OnRejected(sale, func(context.Context, *Sale, CancelPayment, error, *saga.Output) error { return nil }),
	)
}
