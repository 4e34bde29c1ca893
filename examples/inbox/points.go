package main

import (
	"context"
	"errors"
	"fmt"
)

// AwardPoints is the command each queue message carries: give a customer's
// loyalty account some points for a purchase.
type AwardPoints struct {
	Account string
	Points  int
	Order   string
}

// AggregateID implements command.Command.
func (c AwardPoints) AggregateID() string { return c.Account }

// PointsAwarded records points added to an account.
type PointsAwarded struct {
	Points int    `json:"points"`
	Order  string `json:"order"`
}

// ErrNoPoints refuses an award of zero or fewer points.
var ErrNoPoints = errors.New("an award needs a positive number of points")

// Account is a customer's loyalty account. Applying an award twice would
// show in its balance, which is what the example checks.
type Account struct {
	balance int
}

// Award decides.
func (a *Account) Award(_ context.Context, c AwardPoints) ([]any, error) {
	if c.Points <= 0 {
		return nil, fmt.Errorf("%w: %d for order %s", ErrNoPoints, c.Points, c.Order)
	}
	return []any{PointsAwarded{Points: c.Points, Order: c.Order}}, nil
}

// Awarded evolves.
func (a *Account) Awarded(e PointsAwarded) { a.balance += e.Points }
