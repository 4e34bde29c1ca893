// Package v2 is version 2 of the reservation service's model: payments
// belong to a Finance aggregate, one per customer account, instead of a
// Payment aggregate per order. Orders and seat reservations are unchanged
// (package domain).
//
// Version 1's events stay where they were written: its payments in
// "payment-<order>" streams. The upcasters in this package read them as
// Finance's events, the commands the version 1 sale recorded as version 2's
// commands, and the version 1 sale state as version 2's.
package v2

import (
	"context"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// Currency is what every amount was in before version 2 named it.
const Currency = "EUR"

// AuthorizePayment is the customer's authorization of an order's payment.
type AuthorizePayment struct {
	Account string
	OrderID string
}

// MakePayment is the sale asking for an order's payment.
type MakePayment struct {
	Account     string `json:"account"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// CancelPayment closes an order's payment that was not taken; a payment
// taken in time refuses it.
type CancelPayment struct {
	Account string `json:"account"`
	OrderID string `json:"order_id"`
}

// AggregateID implements command.Command: payments go to the customer's
// account.
func (c AuthorizePayment) AggregateID() string { return c.Account }

// AggregateID implements command.Command.
func (c MakePayment) AggregateID() string { return c.Account }

// AggregateID implements command.Command.
func (c CancelPayment) AggregateID() string { return c.Account }

// Finance's events. Each names the account and the order.
type (
	// PaymentAuthorized: the customer authorized a payment the sale has
	// not asked for yet.
	PaymentAuthorized struct {
		Account string `json:"account"`
		OrderID string `json:"order_id"`
	}
	// PaymentRequested: the sale asked for a payment not yet authorized.
	PaymentRequested struct {
		Account     string `json:"account"`
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
	}
	// PaymentAccepted: a payment taken, asked for and authorized. In
	// version 1 it was the Payment aggregate's event.
	PaymentAccepted struct {
		Account     string `json:"account"`
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
	}
	// PaymentCancelled: an open payment was closed, its window over.
	PaymentCancelled struct {
		Account string `json:"account"`
		OrderID string `json:"order_id"`
	}
)

// payment is one order's payment in an account.
type payment struct {
	authorized, requested, accepted, cancelled bool
	amountCents                                int64
}

// Finance is the finance aggregate of one customer account: the payments
// of all its orders, and what it has paid in all.
type Finance struct {
	payments  map[string]*payment
	paidCents int64
}

func (f *Finance) payment(orderID string) payment {
	if p := f.payments[orderID]; p != nil {
		return *p
	}
	return payment{}
}

// financeBindings bind the account's commands and events to its methods.
var financeBindings = []aggregate.Binding[Finance]{
	aggregate.Handles((*Finance).Authorize),
	aggregate.Handles((*Finance).Request),
	aggregate.Handles((*Finance).Cancel),
	aggregate.Applies((*Finance).Authorized),
	aggregate.Applies((*Finance).Requested),
	aggregate.Applies((*Finance).Accepted),
	aggregate.Applies((*Finance).Cancelled),
}

// Authorize, Request and Cancel decide, with the rules of version 1's
// Payment for each order: the sale's request and the customer's
// authorization complete a payment in either order, and a card refuses
// more than domain.CardLimitCents.
func (f *Finance) Authorize(_ context.Context, c AuthorizePayment) ([]any, error) {
	switch p := f.payment(c.OrderID); {
	case p.cancelled:
		return nil, domain.ErrPaymentClosed
	case p.authorized || p.accepted:
		return nil, nil
	case p.requested:
		return []any{PaymentAccepted{Account: c.Account, OrderID: c.OrderID, AmountCents: p.amountCents, Currency: Currency}}, nil
	}
	return []any{PaymentAuthorized(c)}, nil
}

func (f *Finance) Request(_ context.Context, c MakePayment) ([]any, error) {
	switch p := f.payment(c.OrderID); {
	case c.AmountCents > domain.CardLimitCents:
		return nil, domain.ErrPaymentRefused
	case p.requested || p.accepted || p.cancelled:
		return nil, nil
	case p.authorized:
		return []any{PaymentAccepted(c)}, nil
	}
	return []any{PaymentRequested(c)}, nil
}

func (f *Finance) Cancel(_ context.Context, c CancelPayment) ([]any, error) {
	switch p := f.payment(c.OrderID); {
	case p.accepted:
		return nil, domain.ErrPaymentTaken
	case p.cancelled || !p.requested:
		return nil, nil // nothing open: the sale never asked, or the card refused
	}
	return []any{PaymentCancelled(c)}, nil
}

// at returns the payment of order orderID, to evolve it.
func (f *Finance) at(orderID string) *payment {
	if f.payments == nil {
		f.payments = make(map[string]*payment)
	}
	if f.payments[orderID] == nil {
		f.payments[orderID] = &payment{}
	}
	return f.payments[orderID]
}

// Authorized, Requested, Accepted and Cancelled evolve.
func (f *Finance) Authorized(e PaymentAuthorized) { f.at(e.OrderID).authorized = true }

func (f *Finance) Requested(e PaymentRequested) {
	p := f.at(e.OrderID)
	p.requested, p.amountCents = true, e.AmountCents
}

func (f *Finance) Accepted(e PaymentAccepted) {
	p := f.at(e.OrderID)
	p.accepted, p.amountCents = true, e.AmountCents
	f.paidCents += e.AmountCents
}

func (f *Finance) Cancelled(e PaymentCancelled) { f.at(e.OrderID).cancelled = true }
