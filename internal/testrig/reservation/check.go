package reservation

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Checker checks how orders ended, from their aggregates' streams in a
// store: the checks that the saga's crash tests and its simulation share.
type Checker struct {
	store    eventstore.Store
	orders   *aggregate.Repository[Order, *Order]
	seats    *aggregate.Repository[Seats, *Seats]
	payments *aggregate.Repository[Payment, *Payment]
}

// NewChecker returns a checker of the orders in store, whose events reg
// (set up with [Register]) decodes.
func NewChecker(store eventstore.Store, reg *codec.Registry) (*Checker, error) {
	c := &Checker{store: store}
	var err error
	if c.orders, err = aggregate.NewRepository(store, reg, Orders, aggregate.RepositoryOptions{}); err != nil {
		return nil, err
	}
	if c.seats, err = aggregate.NewRepository(store, reg, Reserves, aggregate.RepositoryOptions{}); err != nil {
		return nil, err
	}
	if c.payments, err = aggregate.NewRepository(store, reg, Payments, aggregate.RepositoryOptions{}); err != nil {
		return nil, err
	}
	return c, nil
}

// Check returns what is wrong with how order id ended, given its inputs:
// the order's, the reservation's and the payment's states differ from
// [Inputs.Expect], a stream holds more or fewer events than
// [Inputs.Events], or two of a stream's events carry one command ID (a
// command that took effect twice) or none. Nothing wrong is an empty list;
// the error is the store's.
func (c *Checker) Check(ctx context.Context, id string, in Inputs) ([]string, error) {
	want := in.Expect()
	var problems []string
	differ := func(what string, got, want any) {
		if got != want {
			problems = append(problems, fmt.Sprintf("order %s: %s is %v, want %v", id, what, got, want))
		}
	}
	o, err := c.orders.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := c.seats.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := c.payments.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	differ("order confirmed", o.State.Confirmed, want.Confirmed)
	differ("order rejected", o.State.Rejected, want.Rejected)
	differ("order's rejection reason", o.State.Reason, want.Reason)
	differ("reservation made", r.State.Reserved, want.Reserved)
	differ("reservation cancelled", r.State.Cancelled, want.Cancelled)
	differ("payment accepted", p.State.Accepted, want.Paid)
	differ("payment pending", p.State.Pending, in.Pending() && in.Seats <= MaxSeats)

	wo, wr, wp := in.Events()
	for _, s := range []struct {
		stream string
		want   int
	}{{Orders.Stream(id), wo}, {Reserves.Stream(id), wr}, {Payments.Stream(id), wp}} {
		commands := make(map[string]uint64)
		n := 0
		for ev, err := range c.store.ReadStream(ctx, s.stream, eventstore.Forward(0)) {
			if err != nil {
				return nil, err
			}
			n++
			cmd := ev.Metadata.CommandID
			if first, twice := commands[cmd]; twice {
				problems = append(problems, fmt.Sprintf("%s: event #%d (%s) carries command ID %q, as #%d does: a command took effect twice",
					s.stream, ev.Version, ev.Type, cmd, first))
			} else if cmd == "" {
				problems = append(problems, fmt.Sprintf("%s: event #%d (%s) carries no command ID", s.stream, ev.Version, ev.Type))
			}
			commands[cmd] = ev.Version
		}
		differ(s.stream+"'s number of events", n, s.want)
	}
	return problems, nil
}
