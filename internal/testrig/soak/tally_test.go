package soak_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
)

// The check of the soak: every event in the store read once, tallied per
// order, and each order judged against what its inputs dictate
// (reservation.Expect) and how many events each of its streams must hold
// (reservation.Events).

// orderTally is what the store holds of one order: how many events each
// of its streams holds, and the end that the order's and the
// reservation's tell.
type orderTally struct {
	order, seats, payment int
	reservation.End
}

// tally reads the store forward, from where it stopped last.
type tally struct {
	reg     *codec.Registry
	from    eventstore.Position
	orders  map[int]*orderTally
	foreign []string // streams that belong to no order of the soak
	sagas   int      // saga step records
}

func newTally(reg *codec.Registry) *tally {
	return &tally{reg: reg, from: eventstore.Start, orders: make(map[int]*orderTally)}
}

// read tallies the events appended since the last read.
func (t *tally) read(ctx context.Context, s eventstore.Store) error {
	for e, err := range s.ReadAll(ctx, t.from, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		t.from = e.Position
		if err := t.add(e); err != nil {
			return err
		}
	}
	return nil
}

func (t *tally) add(e eventstore.Event) error {
	if strings.HasPrefix(e.StreamID, "saga:") {
		t.sagas++
		return nil
	}
	kind, id, _ := strings.Cut(e.StreamID, "-")
	i, err := strconv.Atoi(strings.TrimPrefix(id, "o"))
	if err != nil || !strings.HasPrefix(id, "o") || (kind != "order" && kind != "seats" && kind != "payment") {
		t.foreign = append(t.foreign, e.StreamID)
		return nil
	}
	o := t.orders[i]
	if o == nil {
		o = &orderTally{}
		t.orders[i] = o
	}
	switch kind {
	case "order":
		o.order++
	case "seats":
		o.seats++
	case "payment":
		o.payment++ // a payment or a recorded rejection: only counted
		return nil
	}
	vs, err := t.reg.Decode(e)
	if err != nil {
		return err
	}
	for _, v := range vs {
		o.Apply(v.Value)
	}
	return nil
}

// verdict is how one order stands.
type verdict int

const (
	// notApplied: not in the store; fine for an order never acknowledged.
	notApplied verdict = iota
	// inFlight: applied, its flow not ended yet.
	inFlight
	// complete: ended as its inputs dictate, every stream exact.
	complete
	// duplicated: a stream holds more events than commands applied once
	// would append.
	duplicated
	// unexpected: ended otherwise than its inputs dictate.
	unexpected
)

// judge says how order i stands, and why when it is not complete.
func (t *tally) judge(i int) (verdict, string) {
	o := t.orders[i]
	if o == nil || !o.Placed {
		if o != nil {
			return unexpected, fmt.Sprintf("events without an OrderPlaced: %+v", *o)
		}
		return notApplied, ""
	}
	_, seats, amount := orderInput(i)
	want := reservation.Expect(seats, amount)
	wo, ws, wp := reservation.Events(seats, amount)
	switch {
	case o.order > wo || o.seats > ws || o.payment > wp:
		return duplicated, fmt.Sprintf("streams hold %d/%d/%d events, want %d/%d/%d", o.order, o.seats, o.payment, wo, ws, wp)
	case o.Confirmed && !want.Confirmed, o.Rejected && !want.Rejected,
		o.Rejected && o.Reason != want.Reason, o.Cancelled && !want.Cancelled:
		return unexpected, fmt.Sprintf("ended %+v, want %+v", *o, want)
	case o.order < wo || o.seats < ws || o.payment < wp:
		return inFlight, fmt.Sprintf("streams hold %d/%d/%d events, want %d/%d/%d", o.order, o.seats, o.payment, wo, ws, wp)
	}
	return complete, ""
}

// outcome is the Jepsen-style count of a soak: of the orders attempted,
// how many were acknowledged by the bus, applied (placed in the store),
// lost (acknowledged and not in the store, or in the store and not ended
// within the drain), duplicated, or unexpected (ended otherwise, or in the
// store without being attempted).
type outcome struct {
	Attempted, Acknowledged, Applied  int
	Lost, Duplicated, Unexpected      int
	Confirmed, RejectedSeats, Refused int
	InFlight                          int
	Examples                          []string
}

// Valid is the verdict on history: nothing lost, duplicated or
// unexpected.
func (o outcome) Valid() bool { return o.Lost == 0 && o.Duplicated == 0 && o.Unexpected == 0 }

// count judges every order of p against the tally.
func (t *tally) count(p placement) outcome {
	out := outcome{Attempted: p.Attempted, Acknowledged: p.Acknowledged()}
	example := func(i int, why string) {
		if len(out.Examples) < 10 {
			out.Examples = append(out.Examples, fmt.Sprintf("order %d: %s", i, why))
		}
	}
	for i := range p.Attempted {
		v, why := t.judge(i)
		if v != notApplied {
			out.Applied++
		}
		switch v {
		case notApplied:
			if p.Acked[i] {
				out.Lost++
				example(i, "acknowledged, not in the store")
			}
		case inFlight:
			// Applied, acknowledged or not: its flow must end.
			out.InFlight++
			out.Lost++
			example(i, "not ended: "+why)
		case duplicated:
			out.Duplicated++
			example(i, "duplicated: "+why)
		case unexpected:
			out.Unexpected++
			example(i, why)
		case complete:
			switch o := t.orders[i]; {
			case o.Confirmed:
				out.Confirmed++
			case o.Reason == domain.ReasonNoSeats:
				out.RejectedSeats++
			default:
				out.Refused++
			}
		}
	}
	for i := range t.orders {
		if i >= p.Attempted {
			out.Unexpected++
			example(i, "in the store, never attempted")
		}
	}
	for _, s := range t.foreign {
		out.Unexpected++
		example(-1, "foreign stream "+s)
	}
	return out
}
