package reservation

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
)

// End is how an order ended, as the events in its order's, reservation's
// and payment's streams tell. The example's aggregates keep their state to
// themselves, so it is read from the events rather than from them.
type End struct {
	// Placed, Confirmed and Rejected, with its Reason, are the order's.
	Placed, Confirmed, Rejected bool
	Reason                      string
	// Reserved and Cancelled are the reservation's.
	Reserved, Cancelled bool
	// Paid and Pending are the payment's: accepted, or left pending.
	Paid, Pending bool
}

// Apply adds v, a decoded event of one of the order's streams, to e.
func (e *End) Apply(v any) {
	switch v := v.(type) {
	case domain.OrderPlaced:
		e.Placed = true
	case domain.OrderConfirmed:
		e.Confirmed = true
	case domain.OrderRejected:
		e.Rejected, e.Reason = true, v.Reason
	case domain.SeatsReserved:
		e.Reserved = true
	case domain.ReservationCancelled:
		e.Cancelled = true
	case PaymentAccepted:
		e.Paid = true
	case PaymentPending:
		e.Pending = true
	}
}

// Checker checks how orders ended, from their aggregates' streams in a
// store: the checks that the saga's tests, its crash tests (flowtest) and
// its simulation share.
type Checker struct {
	store eventstore.Store
	reg   *codec.Registry
}

// NewChecker returns a checker of the orders in store, whose events reg
// (set up with [Register]) decodes.
func NewChecker(store eventstore.Store, reg *codec.Registry) (*Checker, error) {
	_, _, tickets := codec.NameOf[domain.OrderPlaced](reg)
	_, _, payments := codec.NameOf[PaymentPending](reg)
	if !tickets || !payments {
		return nil, fmt.Errorf("%w: reservation: the checker's registry is not set up with Register", eventstore.ErrInvalidArgument)
	}
	return &Checker{store: store, reg: reg}, nil
}

// streams are the streams of order id: its order's, its reservation's and
// its payment's.
func streams(id string) [3]string {
	return [3]string{domain.Orders.Stream(id), domain.Reservations.Stream(id), Payments.Stream(id)}
}

// read reads order id's streams: it hands each stored event to visit, with
// the index of its stream in [streams], and applies each event of the flow
// to the end it returns. A record of Cairn's own (a recorded rejection of
// a payment) is visited, not applied.
func (c *Checker) read(ctx context.Context, id string, visit func(stream int, ev eventstore.Event)) (End, error) {
	var end End
	for i, stream := range streams(id) {
		for ev, err := range c.store.ReadStream(ctx, stream, eventstore.Forward(0)) {
			if err != nil {
				return end, err
			}
			visit(i, ev)
			if codec.IsReserved(ev.Type) {
				continue
			}
			values, err := c.reg.Decode(ev)
			if err != nil {
				return end, err
			}
			for _, v := range values {
				end.Apply(v.Value)
			}
		}
	}
	return end, nil
}

// End returns how order id ended, as its streams tell.
func (c *Checker) End(ctx context.Context, id string) (End, error) {
	return c.read(ctx, id, func(int, eventstore.Event) {})
}

// Check returns what is wrong with how order id ended, given its inputs:
// the order's, the reservation's and the payment's ends differ from
// [Inputs.Expect], a stream holds more or fewer events than
// [Inputs.Events], or two of a stream's events carry one command ID (a
// command that took effect twice) or none. Nothing wrong is an empty list;
// the error is the store's or the codec's.
func (c *Checker) Check(ctx context.Context, id string, in Inputs) ([]string, error) {
	var (
		counts   [3]int
		commands = [3]map[string]uint64{{}, {}, {}}
		twice    [3][]string // what is wrong with each stream's command IDs
	)
	got, err := c.read(ctx, id, func(i int, ev eventstore.Event) {
		counts[i]++
		cmd := ev.Metadata.CommandID
		if first, again := commands[i][cmd]; again {
			twice[i] = append(twice[i], fmt.Sprintf("%s: event #%d (%s) carries command ID %q, as #%d does: a command took effect twice",
				ev.StreamID, ev.Version, ev.Type, cmd, first))
		} else if cmd == "" {
			twice[i] = append(twice[i], fmt.Sprintf("%s: event #%d (%s) carries no command ID", ev.StreamID, ev.Version, ev.Type))
		}
		commands[i][cmd] = ev.Version
	})
	if err != nil {
		return nil, err
	}
	want := in.Expect()
	var problems []string
	differ := func(what string, got, want any) {
		if got != want {
			problems = append(problems, fmt.Sprintf("order %s: %s is %v, want %v", id, what, got, want))
		}
	}
	differ("order confirmed", got.Confirmed, want.Confirmed)
	differ("order rejected", got.Rejected, want.Rejected)
	differ("order's rejection reason", got.Reason, want.Reason)
	differ("reservation made", got.Reserved, want.Reserved)
	differ("reservation cancelled", got.Cancelled, want.Cancelled)
	differ("payment accepted", got.Paid, want.Paid)
	differ("payment pending", got.Pending, in.Pending() && in.Seats <= domain.MaxSeats)

	wo, wr, wp := in.Events()
	for i, stream := range streams(id) {
		problems = append(problems, twice[i]...)
		differ(stream+"'s number of events", counts[i], [3]int{wo, wr, wp}[i])
	}
	return problems, nil
}
