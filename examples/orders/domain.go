package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
)

// Commands: each names the order it is for.

// PlaceOrder opens an order.
type PlaceOrder struct {
	OrderID    string
	Customer   string
	Lines      int
	TotalCents int64
}

// PayOrder records the customer's payment.
type PayOrder struct {
	OrderID     string
	AmountCents int64
}

// ShipOrder hands a paid order to a carrier.
type ShipOrder struct {
	OrderID string
	Carrier string
}

// AggregateID implements command.Command.
func (c PlaceOrder) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c PayOrder) AggregateID() string { return c.OrderID }

// AggregateID implements command.Command.
func (c ShipOrder) AggregateID() string { return c.OrderID }

// Events: what happened, in the past tense, with stable names registered in
// newRegistry.

// OrderPlaced records a new order.
type OrderPlaced struct {
	Customer   string `json:"customer"`
	Lines      int    `json:"lines"`
	TotalCents int64  `json:"total_cents"`
}

// OrderPaid records a payment of the whole total.
type OrderPaid struct {
	AmountCents int64 `json:"amount_cents"`
}

// OrderShipped records the hand-over to a carrier.
type OrderShipped struct {
	Carrier string `json:"carrier"`
}

// The order's own rejections. The bus returns them unchanged.
var (
	ErrAlreadyPlaced = errors.New("order already placed")
	ErrNotPlaced     = errors.New("order not placed yet")
	ErrNotPaid       = errors.New("order not paid yet")
	ErrWrongAmount   = errors.New("payment does not match the total")
)

// Order is the aggregate: plain state, a method per command that decides,
// a method per event that evolves.
type Order struct {
	placed, paid, shipped bool
	totalCents            int64
}

// orderBindings bind each command and event type to the order's method.
var orderBindings = []aggregate.Binding[Order]{
	aggregate.Handles((*Order).Place),
	aggregate.Handles((*Order).Pay),
	aggregate.Handles((*Order).Ship),
	aggregate.Applies((*Order).Placed),
	aggregate.Applies((*Order).Paid),
	aggregate.Applies((*Order).Shipped),
}

// Place decides a PlaceOrder for the order as it stands.
func (o *Order) Place(_ context.Context, c PlaceOrder) ([]any, error) {
	if o.placed {
		return nil, ErrAlreadyPlaced
	}
	return []any{OrderPlaced{Customer: c.Customer, Lines: c.Lines, TotalCents: c.TotalCents}}, nil
}

// Pay decides a PayOrder.
func (o *Order) Pay(_ context.Context, c PayOrder) ([]any, error) {
	switch {
	case !o.placed:
		return nil, ErrNotPlaced
	case o.paid:
		return nil, nil // paying twice changes nothing
	case c.AmountCents != o.totalCents:
		return nil, fmt.Errorf("%w: paid %d, total %d", ErrWrongAmount, c.AmountCents, o.totalCents)
	}
	return []any{OrderPaid{AmountCents: c.AmountCents}}, nil
}

// Ship decides a ShipOrder.
func (o *Order) Ship(_ context.Context, c ShipOrder) ([]any, error) {
	switch {
	case !o.paid:
		return nil, ErrNotPaid
	case o.shipped:
		return nil, nil
	}
	return []any{OrderShipped{Carrier: c.Carrier}}, nil
}

// Placed, Paid and Shipped evolve the order by one stored event.
func (o *Order) Placed(e OrderPlaced) { o.placed, o.totalCents = true, e.TotalCents }
func (o *Order) Paid(OrderPaid)       { o.paid = true }
func (o *Order) Shipped(OrderShipped) { o.shipped = true }
