package main

import (
	"context"
	"errors"
)

// Commands ask for a change. Each one names the cart it is for.
type (
	AddItem struct {
		CartID, SKU string
		Qty         int
	}
	CheckOut struct{ CartID string }
)

// AggregateID tells the bus which cart the command is for.
func (c AddItem) AggregateID() string  { return c.CartID }
func (c CheckOut) AggregateID() string { return c.CartID }

// Events record what happened, in the past tense.
type (
	ItemAdded struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	CheckedOut struct {
		Items int `json:"items"`
	}
)

// The cart's own refusals; the bus returns them unchanged.
var (
	ErrCheckedOut = errors.New("cart is checked out")
	ErrEmpty      = errors.New("cart is empty")
)

// Cart is the aggregate: plain state, one method per command decides,
// one per event evolves.
type Cart struct {
	items      int
	checkedOut bool
}

func (c *Cart) Add(_ context.Context, cmd AddItem) ([]any, error) {
	if c.checkedOut {
		return nil, ErrCheckedOut
	}
	return []any{ItemAdded{SKU: cmd.SKU, Qty: cmd.Qty}}, nil
}

func (c *Cart) CheckOut(context.Context, CheckOut) ([]any, error) {
	if c.items == 0 {
		return nil, ErrEmpty
	}
	if c.checkedOut {
		return nil, nil // checking out twice changes nothing
	}
	return []any{CheckedOut{Items: c.items}}, nil
}

func (c *Cart) Added(e ItemAdded)     { c.items += e.Qty }
func (c *Cart) CheckedOut(CheckedOut) { c.checkedOut = true }
