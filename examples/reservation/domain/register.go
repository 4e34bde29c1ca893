package domain

import (
	"errors"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
)

// The aggregate types: their names are the categories of their streams
// ("order-<order ID>", ...), stored for good.
var (
	Orders       = mustType[Order]("order", orderBindings...)
	Reservations = mustType[SeatReservation]("seats", reservationBindings...)
	Payments     = mustType[Payment]("payment", paymentBindings...)
)

func mustType[T any, PT aggregate.Root[T]](name string, bindings ...aggregate.Binding[T]) *aggregate.Type[T, PT] {
	t, err := aggregate.NewType[T, PT](name, aggregate.Options[T]{}, bindings...)
	if err != nil {
		panic(err) // a constant name: a bug, caught by any test
	}
	return t
}

// RegisterTickets registers the types of the orders, the seat
// reservations and the sale's deadline: the part of the model that the
// later version keeps as it is. Cairn's saga tests run this part too,
// with a payment of their own (internal/testrig/reservation), so a change
// to it changes what they expect.
func RegisterTickets(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[OrderConfirmed](reg, "order.confirmed", 1),
		codec.Register[OrderRejected](reg, "order.rejected", 1),
		codec.Register[SeatsReserved](reg, "seats.reserved", 1),
		codec.Register[SeatsNotReserved](reg, "seats.not-reserved", 1),
		codec.Register[ReservationCancelled](reg, "seats.cancelled", 1),
		// The commands the sale sends are stored in its steps, so they have
		// stable names too.
		codec.Register[MakeReservation](reg, "sale.make-reservation", 1),
		codec.Register[CancelReservation](reg, "sale.cancel-reservation", 1),
		codec.Register[ConfirmOrder](reg, "sale.confirm-order", 1),
		codec.Register[RejectOrder](reg, "sale.reject-order", 1),
		codec.Register[PaymentDue](reg, "sale.payment-due", 1),
	)
}

// Register registers every type of this version of the model with reg.
func Register(reg *codec.Registry) error {
	return errors.Join(
		RegisterTickets(reg),
		codec.Register[PaymentAuthorized](reg, "payment.authorized", 1),
		codec.Register[PaymentRequested](reg, "payment.requested", 1),
		codec.Register[PaymentAccepted](reg, "payment.accepted", 1),
		codec.Register[PaymentCancelled](reg, "payment.cancelled", 1),
		codec.Register[MakePayment](reg, "sale.make-payment", 1),
		codec.Register[CancelPayment](reg, "sale.cancel-payment", 1),
		codec.Register[Sale](reg, "sale.state", 1),
	)
}

// RouteTickets routes the commands of the orders and seat reservations.
func RouteTickets(bus *command.Bus) error {
	return errors.Join(
		command.Route[PlaceOrder](bus, Orders),
		command.Route[ConfirmOrder](bus, Orders),
		command.Route[RejectOrder](bus, Orders),
		command.Route[MakeReservation](bus, Reservations),
		command.Route[CancelReservation](bus, Reservations),
	)
}

// Route routes every command of this version of the model.
func Route(bus *command.Bus) error {
	return errors.Join(
		RouteTickets(bus),
		command.Route[AuthorizePayment](bus, Payments),
		command.Route[MakePayment](bus, Payments),
		command.Route[CancelPayment](bus, Payments),
	)
}
