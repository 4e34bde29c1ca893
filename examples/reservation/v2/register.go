package v2

import (
	"errors"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// Accounts is the Finance aggregate type: "finance-<account>" streams.
var Accounts = func() *aggregate.Type[Finance, *Finance] {
	t, err := aggregate.NewType[Finance]("finance", aggregate.Options[Finance]{}, financeBindings...)
	if err != nil {
		panic(err) // a constant name: a bug, caught by any test
	}
	return t
}()

// Register registers version 2's types with reg, and the upcasters that
// read version 1's.
func Register(reg *codec.Registry) error {
	return errors.Join(
		domain.RegisterTickets(reg),
		codec.Register[PaymentAuthorized](reg, "finance.payment-authorized", 2),
		codec.Register[PaymentRequested](reg, "finance.payment-requested", 2),
		codec.Register[PaymentAccepted](reg, "finance.payment-accepted", 2),
		codec.Register[PaymentCancelled](reg, "finance.payment-cancelled", 2),
		codec.Register[MakePayment](reg, "sale.make-payment", 2),
		codec.Register[CancelPayment](reg, "sale.cancel-payment", 2),
		codec.Register[Sale](reg, "sale.state", 2),
		reg.Upcast(Upcasters()...),
	)
}

// Route routes every command of version 2.
func Route(bus *command.Bus) error {
	return errors.Join(
		domain.RouteTickets(bus),
		command.Route[AuthorizePayment](bus, Accounts),
		command.Route[MakePayment](bus, Accounts),
		command.Route[CancelPayment](bus, Accounts),
	)
}
