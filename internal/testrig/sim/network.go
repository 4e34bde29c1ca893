package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// pspSource is the payment provider's source name in its deliveries.
const pspSource = "psp"

// parcel is a stored event in flight between the store and the runner.
type parcel struct {
	n  int // in the order the bridge read it; copies come later
	ev eventstore.Event
	// prev is the bridge's cursor before it read ev: its checkpoint while
	// ev is not acknowledged.
	prev eventstore.Position
	due  int // the first tick it may be delivered at
	// acked says the runner took the event once: this is a copy, which
	// may come at any time.
	acked bool
}

// bridge is the delivery layer between the store and the runner, a broker
// that carries the store's events: at least once, each stream's events in
// their order the first time, and otherwise dropped, duplicated, delayed
// and reordered at the injector's will. It lives in the process, and
// resumes after its checkpoint when the process restarts.
type bridge struct {
	loaded bool
	cursor eventstore.Position
	pool   []*parcel
	// heads are, per stream, the events not acknowledged yet, in their
	// order: only the first may be delivered.
	heads map[string][]*parcel
	// unacked are those events in log order, for the checkpoint.
	unacked []*parcel
	n       int
	// skipped says the SkipEvent sabotage was done (once per run).
	skipped bool
}

// reset forgets everything in flight, as a restart does.
func (b *bridge) reset() { *b = bridge{skipped: b.skipped, heads: make(map[string][]*parcel)} }

// sink is where the bridge hands stored events: a runner's HandleStored,
// under the name of the runner's events consumer (whose checkpoint the
// bridge keeps).
type sink struct {
	consumer string
	handle   func(ctx context.Context, ev eventstore.Event) (saga.Outcome, error)
	// park, when set, keeps an event that its instance cannot take as a
	// dead letter, as the runner's own consumer does, and says whether it
	// did: the bridge then acknowledges it and goes on.
	park func(ev eventstore.Event, err error) (bool, error)
}

// deliverStored is the bridge's turn: it reads what was stored since its
// cursor, then delivers what it may.
func (w *base) deliverStored(b *bridge, to sink) error {
	if !b.loaded {
		cp, err := w.checkpoints.Checkpoint(w.ctx, to.consumer)
		if err != nil {
			return err
		}
		b.cursor, b.loaded = cp.Position, true
	}
	for ev, err := range w.mem.ReadAll(w.ctx, b.cursor, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		prev := b.cursor
		b.cursor = ev.Position
		if strings.HasPrefix(ev.StreamID, saga.StreamPrefix) {
			continue // the runner's own records go to the outbox
		}
		p := &parcel{n: b.n, ev: ev, prev: prev, due: w.tick}
		b.n++
		b.pool = append(b.pool, p)
		b.heads[ev.StreamID] = append(b.heads[ev.StreamID], p)
		b.unacked = append(b.unacked, p)
	}
	for range perTick {
		var eligible []*parcel
		for _, p := range b.pool {
			if p.due <= w.tick && (p.acked || b.heads[p.ev.StreamID][0] == p) {
				eligible = append(eligible, p)
			}
		}
		if len(eligible) == 0 {
			return nil
		}
		i, due := w.transit(len(eligible))
		p := eligible[i]
		if due >= 0 {
			p.due = due
			continue
		}
		if crashed, err := w.deliverParcel(b, p, to); err != nil || crashed {
			return err // a crash lost the bridge's pool: the new process reads again
		}
	}
	return nil
}

// deliverParcel hands one parcel to the runner, and acknowledges it when
// the runner took it; crashed says the process restarted meanwhile.
func (w *base) deliverParcel(b *bridge, p *parcel, to sink) (crashed bool, _ error) {
	ev := p.ev
	if p.acked && w.cfg.Sabotage == RewriteSequences {
		ev.Version += 1 << 20
	}
	what := fmt.Sprintf("deliver %s#%d %s", p.ev.StreamID, p.ev.Version, p.ev.Type)
	if !p.acked && !b.skipped && w.cfg.Sabotage == SkipEvent && ev.Type == "seats.reserved" {
		b.skipped = true
		w.tracef("%s: sabotaged, acknowledged without delivery", what)
	} else {
		w.op()
		out, err := to.handle(w.ctx, ev)
		if err != nil && to.park != nil {
			parked, perr := to.park(p.ev, err)
			if perr != nil {
				return false, perr
			}
			if parked {
				w.tracef("%s: dead letter: %v", what, err)
				err, out = nil, saga.Parked
			}
		}
		if err != nil {
			p.due = w.tick + 1
			return w.failed(what, err, CrashStep)
		}
		w.tracef("%s: %s", what, out)
	}
	b.ack(p)
	if dup, aux := w.inj.fault(Duplicate); dup {
		b.pool = append(b.pool, &parcel{n: b.n, ev: p.ev, due: w.tick + int(aux%4), acked: true})
		b.n++
	}
	return false, nil
}

// transit decides what the network does with the next delivery, the
// oldest of n eligible ones: it may deliver another one instead
// (reorder), hold it back (delay), or lose it (drop: the broker redelivers
// it after a timeout). It returns the index of the one it picks, and the
// tick to which it is put off, or -1 when it goes now.
func (w *base) transit(n int) (i, due int) {
	if f, aux := w.inj.fault(Reorder); f {
		i = int(aux % uint64(n))
	}
	if f, aux := w.inj.fault(Delay); f {
		return i, w.tick + 1 + int(aux%3)
	}
	if f, aux := w.inj.fault(Drop); f {
		return i, w.tick + 3 + int(aux%5)
	}
	return i, -1
}

// ack takes p out of flight once the runner has it.
func (b *bridge) ack(p *parcel) {
	b.pool = slices.DeleteFunc(b.pool, func(q *parcel) bool { return q == p })
	if p.acked {
		return
	}
	p.acked = true
	b.heads[p.ev.StreamID] = b.heads[p.ev.StreamID][1:]
	if len(b.heads[p.ev.StreamID]) == 0 {
		delete(b.heads, p.ev.StreamID)
	}
}

// saveBridge moves the bridge's checkpoint past the events delivered, up
// to the first one not acknowledged.
func (w *base) saveBridge(b *bridge, consumer string) error {
	if !b.loaded {
		return nil
	}
	for len(b.unacked) > 0 && b.unacked[0].acked {
		b.unacked = b.unacked[1:]
	}
	through := b.cursor
	if len(b.unacked) > 0 {
		through = b.unacked[0].prev
	}
	return w.saveCheckpoint(consumer, through)
}

// note is a message of the payment provider.
type note struct {
	o   *order
	seq uint64
	// id is the message's ID: random, as a provider's are, and the same on
	// every redelivery.
	id  uuid.UUID
	at  time.Time // when the provider sends it
	due int
}

// psp is the payment provider: outside the process, it survives its
// crashes, and it delivers its messages for an order (PaymentAuthorized
// numbered 0, PaymentAccepted numbered 1) through Runner.Deliver at least
// once, in any order.
type psp struct {
	scheduled []*note
	pool      []*note
}

// settle schedules the provider's messages for an order whose payment
// just went pending: around the end of the payment window, and for some
// orders the second one first.
func (p *psp) settle(w *world, o *order) {
	at := w.clock.Now().Add(o.offset)
	first, second := at.Add(-45*time.Second), at
	if o.early {
		first, second = second, first
	}
	p.scheduled = append(p.scheduled, &note{o: o, seq: 0, id: uuid.Must(uuid.NewV7()), at: first},
		&note{o: o, seq: 1, id: uuid.Must(uuid.NewV7()), at: second})
	w.tracef("provider settles %s at +%s", o.id, at.Sub(w.start))
}

// deliverExternal is the provider's turn.
func (w *world) deliverExternal() error {
	p := &w.psp
	now := w.clock.Now()
	// What the provider sent since the last tick arrives in the order it
	// was sent.
	slices.SortStableFunc(p.scheduled, func(a, b *note) int { return a.at.Compare(b.at) })
	for _, n := range p.scheduled {
		if !n.at.After(now) {
			n.due = w.tick
			p.pool = append(p.pool, n)
		}
	}
	p.scheduled = slices.DeleteFunc(p.scheduled, func(n *note) bool { return !n.at.After(now) })
	for range perTick {
		var eligible []*note
		for _, n := range p.pool {
			if n.due <= w.tick {
				eligible = append(eligible, n)
			}
		}
		if len(eligible) == 0 {
			return nil
		}
		i, due := w.transit(len(eligible))
		n := eligible[i]
		if due >= 0 {
			n.due = due
			continue
		}
		var ev any = reservation.PaymentAuthorized{OrderID: n.o.id}
		if n.seq == 1 {
			ev = reservation.PaymentAccepted{OrderID: n.o.id, AmountCents: n.o.in.AmountCents}
		}
		what := fmt.Sprintf("deliver %s %s#%d %T", pspSource, n.o.id, n.seq, ev)
		w.op()
		out, err := w.proc.runner.Deliver(w.ctx, saga.Delivery{Source: pspSource, Sequence: n.seq,
			ID: n.id, Event: ev})
		if err != nil {
			n.due = w.tick + 1
			if _, err := w.failed(what, err, CrashStep); err != nil {
				return err
			}
			continue
		}
		w.tracef("%s: %s", what, out)
		p.pool = slices.DeleteFunc(p.pool, func(m *note) bool { return m == n })
		if dup, aux := w.inj.fault(Duplicate); dup {
			p.pool = append(p.pool, &note{o: n.o, seq: n.seq, id: n.id, at: n.at, due: w.tick + int(aux%4)})
		}
	}
	return nil
}

// outbox is the outbox dispatcher's place in the saga's step records. It
// keeps its checkpoint under the runner's outbox consumer's name, so that
// Explain tells the commands it has not sent.
type outbox struct {
	loaded bool
	cursor eventstore.Position
}

// reset forgets the place, as a restart does: it resumes after its
// checkpoint.
func (o *outbox) reset() { *o = outbox{} }

func (o *outbox) load(w *base, consumer string) error {
	if o.loaded {
		return nil
	}
	cp, err := w.checkpoints.Checkpoint(w.ctx, consumer)
	if err != nil {
		return err
	}
	o.cursor, o.loaded = cp.Position, true
	return nil
}
