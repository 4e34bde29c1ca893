package domain

import (
	"context"
	"errors"

	"github.com/cairn-es/cairn/aggregate"
)

// CardLimitCents is the largest payment a card takes: more is refused.
const CardLimitCents = 600_00

// AuthorizePayment is the customer's authorization of an order's payment,
// from their bank's app. It comes through the customer's client, so it may
// arrive before the sale asks for the payment, or even before the order.
type AuthorizePayment struct {
	OrderID  string
	Customer string
}

// MakePayment is the sale asking for an order's payment.
type MakePayment struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// CancelPayment closes an order's payment that was not taken: the sale
// sends it when its payment window ends. A payment taken in time refuses
// it, so a deadline that fires late (the sale was down, or slow) never
// loses a payment that came in time.
type CancelPayment struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
}

// AggregateID implements command.Command: a payment belongs to one order.
func (c AuthorizePayment) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c MakePayment) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c CancelPayment) AggregateID() string { return c.OrderID }

// PaymentAuthorized records a customer's authorization that came before the
// sale asked for the payment: it is kept until then.
type PaymentAuthorized struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
}

// PaymentRequested records the sale asking for a payment the customer has
// not authorized yet.
type PaymentRequested struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// PaymentAccepted records a payment taken: asked for and authorized.
type PaymentAccepted struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// PaymentCancelled records that an open payment will not be taken.
type PaymentCancelled struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
}

// ErrPaymentRefused is the card's refusal of an amount above
// CardLimitCents: a rejection the sale compensates. ErrPaymentClosed
// refuses an authorization that came after the payment was closed, and
// ErrPaymentTaken refuses to close a payment that was taken.
var (
	ErrPaymentRefused = errors.New("payment refused: the amount is above the card's limit")
	ErrPaymentClosed  = errors.New("the payment was closed: its window ended")
	ErrPaymentTaken   = errors.New("the payment was taken in time")
)

// Payment is the payment aggregate of one order.
type Payment struct {
	authorized, requested, accepted, cancelled bool
	amountCents                                int64
}

// paymentBindings bind the payment's commands and events to its methods.
var paymentBindings = []aggregate.Binding[Payment]{
	aggregate.Handles((*Payment).Authorize),
	aggregate.Handles((*Payment).Request),
	aggregate.Handles((*Payment).Cancel),
	aggregate.Applies((*Payment).Authorized),
	aggregate.Applies((*Payment).Requested),
	aggregate.Applies((*Payment).Accepted),
	aggregate.Applies((*Payment).Cancelled),
}

// Authorize, Request and Cancel decide. The sale's request and the
// customer's authorization complete the payment in either order; each of
// them twice changes nothing. The payment, not the sale's clock, says
// whether it came in time: whichever of the authorization and the closing
// reaches it first wins.
func (p *Payment) Authorize(_ context.Context, c AuthorizePayment) ([]any, error) {
	switch {
	case p.cancelled:
		return nil, ErrPaymentClosed
	case p.authorized || p.accepted:
		return nil, nil
	case p.requested:
		return []any{PaymentAccepted{OrderID: c.OrderID, Customer: c.Customer, AmountCents: p.amountCents}}, nil
	}
	return []any{PaymentAuthorized(c)}, nil
}

func (p *Payment) Request(_ context.Context, c MakePayment) ([]any, error) {
	switch {
	case c.AmountCents > CardLimitCents:
		return nil, ErrPaymentRefused
	case p.requested || p.accepted || p.cancelled:
		return nil, nil
	case p.authorized:
		return []any{PaymentAccepted(c)}, nil
	}
	return []any{PaymentRequested(c)}, nil
}

func (p *Payment) Cancel(_ context.Context, c CancelPayment) ([]any, error) {
	switch {
	case p.accepted:
		return nil, ErrPaymentTaken
	case p.cancelled || !p.requested:
		return nil, nil // nothing open: the sale never asked, or the card refused
	}
	return []any{PaymentCancelled(c)}, nil
}

// Authorized, Requested, Accepted and Cancelled evolve.
func (p *Payment) Authorized(PaymentAuthorized) { p.authorized = true }
func (p *Payment) Requested(e PaymentRequested) { p.requested, p.amountCents = true, e.AmountCents }
func (p *Payment) Accepted(e PaymentAccepted)   { p.accepted, p.amountCents = true, e.AmountCents }
func (p *Payment) Cancelled(PaymentCancelled)   { p.cancelled = true }
