// Package domain is version 1 of the reservation service's model: the
// Order, SeatReservation and Payment aggregates, which never handle each
// other's events, and the Sale saga that coordinates them.
//
//	OrderPlaced                  -> MakeReservation
//	SeatsReserved                -> MakePayment, and a payment deadline
//	SeatsNotReserved             -> RejectOrder
//	PaymentAccepted              -> ConfirmOrder
//	MakePayment rejected         -> RejectOrder, CancelReservation
//	the payment deadline fires   -> CancelPayment (refused if the payment was taken)
//	PaymentCancelled             -> RejectOrder, CancelReservation
//
// A payment needs two things, in either order: the sale asks for it
// (MakePayment) and the customer authorizes it in their bank's app
// (AuthorizePayment, which comes from the customer, not from the sale).
// Whichever arrives second completes it.
package domain

import (
	"context"
	"errors"

	"github.com/cairn-es/cairn/aggregate"
)

// Why an order is rejected: the reason recorded in OrderRejected.
const (
	ReasonNoSeats        = "no seats"
	ReasonPaymentRefused = "payment refused"
	ReasonNoPayment      = "no payment in time"
)

// PlaceOrder is a customer's order for seats, at a price.
type PlaceOrder struct {
	OrderID     string
	Customer    string
	Seats       int
	AmountCents int64
}

// ConfirmOrder confirms an order whose seats are reserved and paid.
type ConfirmOrder struct {
	OrderID string `json:"order_id"`
}

// RejectOrder rejects an order, saying why.
type RejectOrder struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// AggregateID implements command.Command.
func (c PlaceOrder) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c ConfirmOrder) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c RejectOrder) AggregateID() string { return c.OrderID }

// OrderPlaced records a new order.
type OrderPlaced struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	Seats       int    `json:"seats"`
	AmountCents int64  `json:"amount_cents"`
}

// OrderConfirmed records that the order is confirmed: a final state.
type OrderConfirmed struct {
	OrderID string `json:"order_id"`
}

// OrderRejected records that the order is rejected, and why: a final
// state.
type OrderRejected struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// ErrOrderFinal refuses to confirm a rejected order or reject a confirmed
// one; ErrNoOrder refuses to end an order that was never placed.
var (
	ErrOrderFinal = errors.New("the order is already final")
	ErrNoOrder    = errors.New("no such order")
)

// Order is the order aggregate.
type Order struct {
	placed, confirmed, rejected bool
}

// orderBindings bind the order's commands and events to its methods.
var orderBindings = []aggregate.Binding[Order]{
	aggregate.Handles((*Order).Place),
	aggregate.Handles((*Order).Confirm),
	aggregate.Handles((*Order).Reject),
	aggregate.Applies((*Order).Placed),
	aggregate.Applies((*Order).Confirmed),
	aggregate.Applies((*Order).Rejected),
}

// Place, Confirm and Reject decide. Placing, confirming or rejecting twice
// changes nothing; confirming a rejected order (or the reverse) is refused.
func (o *Order) Place(_ context.Context, c PlaceOrder) ([]any, error) {
	if o.placed {
		return nil, nil
	}
	return []any{OrderPlaced(c)}, nil
}

func (o *Order) Confirm(_ context.Context, c ConfirmOrder) ([]any, error) {
	switch {
	case !o.placed:
		return nil, ErrNoOrder
	case o.rejected:
		return nil, ErrOrderFinal
	case o.confirmed:
		return nil, nil
	}
	return []any{OrderConfirmed(c)}, nil
}

func (o *Order) Reject(_ context.Context, c RejectOrder) ([]any, error) {
	switch {
	case !o.placed:
		return nil, ErrNoOrder
	case o.confirmed:
		return nil, ErrOrderFinal
	case o.rejected:
		return nil, nil
	}
	return []any{OrderRejected(c)}, nil
}

// Placed, Confirmed and Rejected evolve.
func (o *Order) Placed(OrderPlaced)       { o.placed = true }
func (o *Order) Confirmed(OrderConfirmed) { o.confirmed = true }
func (o *Order) Rejected(OrderRejected)   { o.rejected = true }
