package saga

import (
	"context"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// releasable returns the next message the instance can take now, or nil:
// none while a message is parked. The held deliveries and rejections that
// can go come first, in the order they were held; then the stored events
// waiting in the pending sources, read again from the store, the one
// stored first first.
func (e *engine[S]) releasable(ctx context.Context, in *instance[S]) (*message, error) {
	r := &in.rec
	if r.Parked != nil || !in.exists {
		return nil, nil
	}
	started := r.State.Type != ""
	var held []*message
	for _, h := range r.Held {
		if e.ready(r, h) {
			if started {
				return heldOut(h), nil
			}
			held = append(held, heldOut(h))
		}
	}
	var stored []*message
	for _, src := range pendingSources(r) {
		msg, err := e.nextPending(ctx, in, src, r.Sources[src])
		switch {
		case err != nil:
			return nil, err
		case msg.pass:
			return msg, nil
		}
		stored = append(stored, msg)
	}
	slices.SortStableFunc(stored, func(a, b *message) int { return a.in.Position.Compare(b.in.Position) })
	candidates := append(held, stored...)
	if !started {
		// An instance that has not started takes first a message that
		// starts it (after a Redrive from its first step, say): taken
		// before it, the others would find no instance and be dropped.
		for _, msg := range candidates {
			if e.starts(ctx, msg) {
				return msg, nil
			}
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	return candidates[0], nil
}

// starts reports whether msg is an event of a type that may start an
// instance.
func (e *engine[S]) starts(ctx context.Context, msg *message) bool {
	if msg.kind() != kindEvent {
		return false
	}
	values, herr, err := e.decodeEvent(ctx, msg)
	if herr != nil || err != nil {
		return false
	}
	for _, v := range values {
		if m := e.t.events[typeOf(v.Value)]; m != nil && m.starts {
			return true
		}
	}
	return false
}

// heldOut is the message of held envelope h, taken out of the held ones.
func heldOut(h envelope) *message {
	msg := &message{in: h, fromHeld: true}
	if h.Metadata != nil {
		msg.md = eventstore.Metadata{CorrelationID: h.Metadata.CorrelationID, CausationID: h.EventID.String()}
	}
	return msg
}

// ready reports whether held message h can be taken now: a rejection or a
// failed command at once; a delivery when it is next in its source (or
// taken already, to be dropped), or when its type may come in any order
// and its source has room above its watermark.
func (e *engine[S]) ready(r *record, h envelope) bool {
	if k := h.kind(); k == kindRejected || k == kindCommand {
		return true
	}
	p := r.Sources[h.Source]
	return p.taken(h.Sequence) || h.Sequence == p.Next || (e.anyOrder(h.Type) && !p.full())
}

// pendingSources returns the sources of r whose stored events wait, in
// name order.
func pendingSources(r *record) []string {
	var out []string
	for src, p := range r.Sources {
		if p.Pending {
			out = append(out, src)
		}
	}
	slices.Sort(out)
	return out
}

// nextPending reads pending source src of instance in from its progress
// on, and returns its first stored event for the instance (last when it is
// the only one the read found), or, when there is none, the pass that ends
// the source's waiting past what was read. A step that moves the source
// on is stored before the next read, so a crash between two leaves the
// source pending where it was.
func (e *engine[S]) nextPending(ctx context.Context, in *instance[S], src string, p progress) (*message, error) {
	types := e.t.storedTypes()
	var found *message
	next := p.Next
	for ev, err := range e.store.ReadStream(ctx, src, eventstore.Forward(p.Next)) {
		if err != nil {
			return nil, err
		}
		next = ev.Version + 1
		if !types[ev.Type] {
			continue
		}
		id, msg, problem := e.storedMessage(ev)
		if problem != nil || msg == nil || id != in.id {
			continue // another instance's, or one the subscription parks as a dead letter
		}
		if found != nil {
			found.last = false
			return found, nil
		}
		msg.pending, msg.last = true, true
		found = msg
	}
	if found != nil {
		return found, nil
	}
	return &message{pass: true, in: envelope{Source: src, Sequence: next, Ordered: true}}, nil
}

// anyOrder reports whether events stored under type name are of a type
// mapped to be handled in any order.
func (e *engine[S]) anyOrder(name string) bool {
	for _, m := range e.t.events {
		if m.anyOrder && m.name == name {
			return true
		}
	}
	return false
}
