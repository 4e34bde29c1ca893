package sagatest

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The conformance suite's own flow, as small as its checks allow: an order
// and its payment, which never handle each other's events, coordinated by
// a sale.
//
//	orderPlaced                         -> charge, and a payment deadline
//	paymentTaken                        -> endOrder (confirmed)
//	charge rejected (over chargeLimit)  -> endOrder (refused)
//	the deadline fires                  -> endOrder (late) and voidPayment
//
// A charge of an amount divisible by 7 stays pending until the deadline,
// so how an order ends follows from its amount and from whether the
// deadline has fired (see expect): the suite can check every order
// whatever the runners went through. It is the suite's alone, so that a
// store's conformance never depends on a domain of Cairn's own tests.

const (
	chargeLimit   = 1000
	paymentWindow = 15 * time.Minute
	reasonRefused = "payment refused"
	reasonLate    = "no payment in time"
)

var errChargeRefused = errors.New("charge refused: over the limit")

type (
	placeOrder struct {
		OrderID string
		Amount  int
	}
	// endOrder ends an order: confirmed when Reason is empty.
	endOrder    struct{ OrderID, Reason string }
	charge      placeOrder
	voidPayment struct{ OrderID string }

	orderPlaced    placeOrder
	orderEnded     endOrder
	paymentTaken   struct{ OrderID string }
	paymentPending struct{ OrderID string }
	paymentVoided  voidPayment
	paymentDue     struct{ OrderID string }

	// sale is the saga's state.
	sale struct {
		OrderID string `json:"order_id"`
	}
)

func (c placeOrder) AggregateID() string  { return c.OrderID }
func (c endOrder) AggregateID() string    { return c.OrderID }
func (c charge) AggregateID() string      { return c.OrderID }
func (c voidPayment) AggregateID() string { return c.OrderID }

// orderState is the order aggregate: the first end is final.
type orderState struct {
	placed, ended bool
	reason        string
}

// orderBindings are the order's handlers and appliers.
func orderBindings() []aggregate.Binding[orderState] {
	return []aggregate.Binding[orderState]{
		aggregate.Handles((*orderState).place),
		aggregate.Handles((*orderState).end),
		aggregate.Applies(func(o *orderState, _ orderPlaced) { o.placed = true }),
		aggregate.Applies(func(o *orderState, e orderEnded) { o.ended, o.reason = true, e.Reason }),
	}
}

func (o *orderState) place(_ context.Context, c placeOrder) ([]any, error) {
	if o.placed {
		return nil, nil
	}
	return []any{orderPlaced(c)}, nil
}

func (o *orderState) end(_ context.Context, c endOrder) ([]any, error) {
	if o.ended {
		return nil, nil
	}
	return []any{orderEnded(c)}, nil
}

// paymentState is the payment aggregate of one order.
type paymentState struct{ taken, pending, voided bool }

// paymentBindings are the payment's handlers and appliers.
func paymentBindings() []aggregate.Binding[paymentState] {
	return []aggregate.Binding[paymentState]{
		aggregate.Handles((*paymentState).charge),
		aggregate.Handles((*paymentState).void),
		aggregate.Applies(func(p *paymentState, _ paymentTaken) { p.taken = true }),
		aggregate.Applies(func(p *paymentState, _ paymentPending) { p.pending = true }),
		aggregate.Applies(func(p *paymentState, _ paymentVoided) { p.voided = true }),
	}
}

func (p *paymentState) charge(_ context.Context, c charge) ([]any, error) {
	switch {
	case p.taken || p.pending:
		return nil, nil
	case c.Amount > chargeLimit:
		return nil, errChargeRefused
	case c.Amount%7 == 0:
		return []any{paymentPending{OrderID: c.OrderID}}, nil
	}
	return []any{paymentTaken{OrderID: c.OrderID}}, nil
}

func (p *paymentState) void(_ context.Context, c voidPayment) ([]any, error) {
	if p.pending && !p.voided {
		return []any{paymentVoided(c)}, nil
	}
	return nil, nil
}

// registerFlow registers the flow's types with reg and routes its commands
// on bus to orders and payments.
func registerFlow(reg *codec.Registry, bus *command.Bus,
	orders *aggregate.Type[orderState, *orderState], payments *aggregate.Type[paymentState, *paymentState]) error {
	return errors.Join(
		codec.Register[placeOrder](reg, "sagatest.place-order", 1),
		codec.Register[endOrder](reg, "sagatest.end-order", 1),
		codec.Register[charge](reg, "sagatest.charge", 1),
		codec.Register[voidPayment](reg, "sagatest.void-payment", 1),
		codec.Register[orderPlaced](reg, "sagatest.order-placed", 1),
		codec.Register[orderEnded](reg, "sagatest.order-ended", 1),
		codec.Register[paymentTaken](reg, "sagatest.payment-taken", 1),
		codec.Register[paymentPending](reg, "sagatest.payment-pending", 1),
		codec.Register[paymentVoided](reg, "sagatest.payment-voided", 1),
		codec.Register[paymentDue](reg, "sagatest.payment-due", 1),
		codec.Register[sale](reg, "sagatest.sale", 1),
		command.Route[placeOrder](bus, orders),
		command.Route[endOrder](bus, orders),
		command.Route[charge](bus, payments),
		command.Route[voidPayment](bus, payments),
	)
}

// newSale declares the sale on reg, where registerFlow registered the
// flow's types.
func newSale(reg *codec.Registry) (*saga.Type[sale], error) {
	s, err := saga.New[sale]("sale", reg, saga.Options[sale]{})
	if err != nil {
		return nil, err
	}
	end := func(st *sale, out *saga.Output, reason string) {
		out.Send(endOrder{OrderID: st.OrderID, Reason: reason})
		out.Complete()
	}
	return s, errors.Join(
		saga.Sends[sale, charge](s),
		saga.Sends[sale, endOrder](s),
		saga.Sends[sale, voidPayment](s),
		saga.On(s, saga.Event[sale, orderPlaced]{
			Instance: func(e orderPlaced, _ eventstore.Metadata) string { return e.OrderID },
			Starts:   true,
			Handle: func(_ context.Context, st *sale, e orderPlaced, out *saga.Output) error {
				st.OrderID = e.OrderID
				out.Send(charge(e))
				out.ScheduleAfter("payment", paymentWindow, paymentDue{OrderID: e.OrderID})
				return nil
			},
		}),
		saga.On(s, saga.Event[sale, paymentTaken]{
			Instance: func(e paymentTaken, _ eventstore.Metadata) string { return e.OrderID },
			Handle: func(_ context.Context, st *sale, _ paymentTaken, out *saga.Output) error {
				out.Cancel("payment")
				end(st, out, "")
				return nil
			},
		}),
		saga.OnRejected(s, func(_ context.Context, st *sale, _ charge, _ error, out *saga.Output) error {
			end(st, out, reasonRefused)
			return nil
		}),
		saga.OnDeadline(s, "payment", func(_ context.Context, st *sale, _ paymentDue, out *saga.Output) error {
			out.Send(voidPayment{OrderID: st.OrderID})
			end(st, out, reasonLate)
			return nil
		}),
	)
}

// outcome is how an order stands: its order's end and its payment's state.
type outcome struct {
	ended                  bool
	reason                 string
	taken, pending, voided bool
}

// expect returns how an order of amount stands once the flow has run, and,
// with deadlinePassed, the payment deadline has fired.
func expect(amount int, deadlinePassed bool) outcome {
	switch {
	case amount > chargeLimit:
		return outcome{ended: true, reason: reasonRefused}
	case amount%7 != 0:
		return outcome{ended: true, taken: true}
	case !deadlinePassed:
		return outcome{pending: true}
	}
	return outcome{ended: true, reason: reasonLate, pending: true, voided: true}
}
