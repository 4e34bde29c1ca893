package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate/aggregatetest"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/examples/reservation/domain"
)

func registry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, domain.Register(reg))
	require.NoError(t, reg.Validate())
	return reg
}

// The sale's request and the customer's authorization complete a payment
// in either order.
func TestAPaymentNeedsTheRequestAndTheAuthorizationInEitherOrder(t *testing.T) {
	reg := registry(t)
	ask := domain.MakePayment{OrderID: "o1", Customer: "ada", AmountCents: 120_00}
	authorize := domain.AuthorizePayment{OrderID: "o1", Customer: "ada"}
	accepted := domain.PaymentAccepted{OrderID: "o1", Customer: "ada", AmountCents: 120_00}

	aggregatetest.For(t, domain.Payments).WithCodec(reg).When(ask).Then(domain.PaymentRequested(ask))
	aggregatetest.For(t, domain.Payments).WithCodec(reg).Given(domain.PaymentRequested(ask)).When(authorize).Then(accepted)
	aggregatetest.For(t, domain.Payments).WithCodec(reg).When(authorize).Then(domain.PaymentAuthorized{OrderID: "o1", Customer: "ada"})
	aggregatetest.For(t, domain.Payments).WithCodec(reg).Given(domain.PaymentAuthorized{OrderID: "o1", Customer: "ada"}).When(ask).Then(accepted)
	aggregatetest.For(t, domain.Payments).Given(accepted).When(authorize).ThenNothing()
}

// Closing a payment when the window ends: a payment taken in time refuses,
// an open one closes, and a late authorization is refused.
func TestTheWindowClosesOnlyAnOpenPayment(t *testing.T) {
	requested := domain.PaymentRequested{OrderID: "o1", Customer: "ada", AmountCents: 120_00}
	accepted := domain.PaymentAccepted{OrderID: "o1", Customer: "ada", AmountCents: 120_00}
	closeIt := domain.CancelPayment{OrderID: "o1", Customer: "ada"}

	aggregatetest.For(t, domain.Payments).Given(requested).When(closeIt).Then(domain.PaymentCancelled(closeIt))
	aggregatetest.For(t, domain.Payments).Given(requested, accepted).When(closeIt).ThenError(domain.ErrPaymentTaken)
	aggregatetest.For(t, domain.Payments).When(closeIt).ThenNothing()
	aggregatetest.For(t, domain.Payments).Given(requested, domain.PaymentCancelled(closeIt)).
		When(domain.AuthorizePayment{OrderID: "o1", Customer: "ada"}).ThenError(domain.ErrPaymentClosed)
	aggregatetest.For(t, domain.Payments).When(domain.MakePayment{OrderID: "o1", AmountCents: domain.CardLimitCents + 1}).
		ThenError(domain.ErrPaymentRefused)
}

func TestSeatsAreRefusedAboveTheMaximum(t *testing.T) {
	aggregatetest.For(t, domain.Reservations).When(domain.MakeReservation{OrderID: "o1", Customer: "ada", Seats: domain.MaxSeats + 1}).
		Then(domain.SeatsNotReserved{OrderID: "o1", Customer: "ada", Seats: domain.MaxSeats + 1})
	aggregatetest.For(t, domain.Reservations).When(domain.MakeReservation{OrderID: "o1", Customer: "ada", Seats: domain.MaxSeats}).
		Then(domain.SeatsReserved{OrderID: "o1", Customer: "ada", Seats: domain.MaxSeats})
}
