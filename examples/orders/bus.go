package main

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
)

// busStats counts what the bus did, through its Observing middleware.
type busStats struct {
	applied, duplicates, conflicts atomic.Int64
}

// newBus routes the order commands to the Order aggregate, counting into
// stats what it does.
func newBus(store eventstore.Store, reg *codec.Registry, stats *busStats, logger *slog.Logger) (*command.Bus, error) {
	observe := command.Observing(func(_ context.Context, o command.Observation) {
		if o.Err != nil {
			return
		}
		if o.Result.Duplicate {
			stats.duplicates.Add(1)
		} else {
			stats.applied.Add(1)
		}
		if o.Result.Attempts > 1 {
			stats.conflicts.Add(int64(o.Result.Attempts - 1))
		}
	})
	bus := command.New(store, reg, command.Options{Middleware: []command.Middleware{observe}, Logger: logger})
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	if err != nil {
		return nil, err
	}
	for _, route := range []func() error{
		func() error { return command.Route[PlaceOrder](bus, orders) },
		func() error { return command.Route[PayOrder](bus, orders) },
		func() error { return command.Route[ShipOrder](bus, orders) },
	} {
		if err := route(); err != nil {
			return nil, err
		}
	}
	return bus, nil
}
