package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
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

// Handle decides.
func (a *Account) Handle(_ context.Context, cmd any) ([]any, error) {
	c, ok := cmd.(AwardPoints)
	switch {
	case !ok:
		return nil, fmt.Errorf("an account cannot handle %T", cmd)
	case c.Points <= 0:
		return nil, fmt.Errorf("%w: %d for order %s", ErrNoPoints, c.Points, c.Order)
	}
	return []any{PointsAwarded{Points: c.Points, Order: c.Order}}, nil
}

// Apply evolves.
func (a *Account) Apply(event any) error {
	e, ok := event.(PointsAwarded)
	if !ok {
		return fmt.Errorf("%w: %T", aggregate.ErrUnknownEvent, event)
	}
	a.balance += e.Points
	return nil
}
