package main

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	v2 "github.com/cairn-es/cairn/examples/reservation/v2"
	"github.com/cairn-es/cairn/saga"
)

// model is one version of the service's code: what the rest of this
// program needs from it.
type model struct {
	name     string
	register func(*codec.Registry) error
	route    func(*command.Bus) error
	// messages are the messages a client sends for an order.
	messages func(order) []message
	// newSale makes a runner of the model's Sale saga.
	newSale func(reg *codec.Registry, store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions, window time.Duration) (*sale, error)
	// payment says what a payment event of the model is ("accepted", ...)
	// and its amount.
	payment func(event any) (what string, cents int64, ok bool)
}

// sale is a runner of either version's Sale saga.
type sale struct {
	runner interface {
		Run(context.Context) error
		CatchUp(context.Context) error
		Stats(context.Context) (saga.Stats, error)
		History(context.Context, string) iter.Seq2[saga.Step, error]
	}
	// outcome reads how the sale of an order ended from its own state:
	// "confirmed", "rejected: <reason>", or "" while it runs.
	outcome func(ctx context.Context, orderID string) (string, error)
	// explain says where the sale of an order stands, for an operator.
	explain func(ctx context.Context, orderID string) (string, error)
}

func newSale[S any](t *saga.Type[S], store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions, outcome func(*S) string) (*sale, error) {
	r, err := saga.NewRunner(t, store, bus, opts)
	if err != nil {
		return nil, err
	}
	return &sale{runner: r,
		outcome: func(ctx context.Context, id string) (string, error) {
			x, err := r.Explain(ctx, id)
			if err != nil || !x.Completed {
				return "", err
			}
			return outcome(x.State), nil
		},
		explain: func(ctx context.Context, id string) (string, error) {
			x, err := r.Explain(ctx, id)
			if err != nil || !x.Exists {
				return "no sale", err
			}
			why := fmt.Sprintf("step %d (%s %s), state %+v, watermarks %v", x.Version, x.LastStep.Kind, x.LastStep.Type, *x.State, x.Watermarks)
			for _, d := range x.Deadlines {
				why += fmt.Sprintf(", deadline %s at %s", d.Name, d.At.Format("15:04:05.000"))
			}
			if len(x.Held) > 0 {
				why += fmt.Sprintf(", %d messages held", len(x.Held))
			}
			if x.Parked != nil {
				why += fmt.Sprintf(", parked on %s: %s", x.Parked.Type, x.Parked.Error)
			}
			return why, nil
		},
	}, nil
}

// placeOrder is the message that places o.
func placeOrder(o order) message {
	return message{id: o.ID + "/place", cmd: domain.PlaceOrder{OrderID: o.ID, Customer: o.Customer, Seats: o.Seats, AmountCents: o.AmountCents}}
}

var modelV1 = model{
	name:     "v1",
	register: domain.Register,
	route:    domain.Route,
	messages: func(o order) []message {
		if !o.Pays {
			return []message{placeOrder(o)}
		}
		return []message{placeOrder(o), {id: o.ID + "/authorize", cmd: domain.AuthorizePayment{OrderID: o.ID, Customer: o.Customer}}}
	},
	newSale: func(reg *codec.Registry, store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions, window time.Duration) (*sale, error) {
		t, err := domain.NewSale(reg, domain.SaleOptions{PaymentWindow: window})
		if err != nil {
			return nil, err
		}
		return newSale(t, store, bus, opts, func(s *domain.Sale) string { return s.Outcome })
	},
	payment: func(event any) (string, int64, bool) {
		switch e := event.(type) {
		case domain.PaymentAuthorized:
			return "authorized", 0, true
		case domain.PaymentRequested:
			return "requested", 0, true
		case domain.PaymentAccepted:
			return "accepted", e.AmountCents, true
		case domain.PaymentCancelled:
			return "cancelled", 0, true
		}
		return "", 0, false
	},
}

var modelV2 = model{
	name:     "v2",
	register: v2.Register,
	route:    v2.Route,
	messages: func(o order) []message {
		if !o.Pays {
			return []message{placeOrder(o)}
		}
		return []message{placeOrder(o), {id: o.ID + "/authorize", cmd: v2.AuthorizePayment{Account: o.Customer, OrderID: o.ID}}}
	},
	newSale: func(reg *codec.Registry, store eventstore.Store, bus *command.Bus, opts saga.RunnerOptions, window time.Duration) (*sale, error) {
		t, err := v2.NewSale(reg, domain.SaleOptions{PaymentWindow: window})
		if err != nil {
			return nil, err
		}
		return newSale(t, store, bus, opts, func(s *v2.Sale) string { return s.Stage })
	},
	payment: func(event any) (string, int64, bool) {
		switch e := event.(type) {
		case v2.PaymentAuthorized:
			return "authorized", 0, true
		case v2.PaymentRequested:
			return "requested", 0, true
		case v2.PaymentAccepted:
			return "accepted", e.AmountCents, true
		case v2.PaymentCancelled:
			return "cancelled", 0, true
		}
		return "", 0, false
	},
}

// modelNamed returns the model called name.
func modelNamed(name string) (model, error) {
	switch name {
	case modelV1.name:
		return modelV1, nil
	case modelV2.name:
		return modelV2, nil
	}
	return model{}, fmt.Errorf("no model %q: want v1 or v2", name)
}

// registry returns m's codec registry, validated.
func (m model) registry() (*codec.Registry, error) {
	reg := codec.NewRegistry(codec.Options{})
	if err := m.register(reg); err != nil {
		return nil, err
	}
	return reg, reg.Validate()
}
