package saga

import (
	"context"
	"slices"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// decide builds the next record of instance in for msg, or returns a nil
// record when there is nothing to store (a duplicate, an ignored message).
// herr is the handler's failure; nothing is stored then.
func (e *engine[S]) decide(ctx context.Context, in *instance[S], msg *message, park *parkedMessage) (rec *record, out outcome, herr error) {
	r := in.next()
	now := e.now().UTC()
	r.Handled = cause{Kind: msg.kind, Source: msg.in.Source, Sequence: msg.in.Sequence, EventID: msg.in.EventID,
		Type: msg.in.Event.Type, Position: msg.in.Position, Ordered: msg.in.Ordered, Deadline: msg.deadline, Command: msg.in.Command,
		Reason: msg.in.Reason, Metadata: msg.in.Metadata, At: now}
	if msg.kind != kindDeadline {
		ev := msg.in.Event
		r.Handled.Event = &ev
	}
	if msg.fromHeld {
		r.Held = slices.DeleteFunc(r.Held, func(h heldMessage) bool { return h.Source == msg.in.Source && h.Sequence == msg.in.Sequence })
	}
	blocked := r.Parked != nil && !msg.unpark
	if msg.unpark {
		r.Parked = nil // whatever this step does with it, it is no longer parked
	}
	// A message that changes nothing stores nothing, unless it came out of
	// the held ones or was the parked one, which the record must now leave
	// out.
	nothing := func(o outcome) (*record, outcome, error) {
		if msg.fromHeld || msg.unpark {
			r.Handled.Kind = kindReleased
			return &r, o, nil
		}
		return nil, o, nil
	}
	hold := func() (*record, outcome, error) {
		h := msg.in
		h.Since = now
		r.Held = append(r.Held, h)
		r.Handled.Kind = kindHeld
		return &r, heldBack, nil
	}

	if msg.kind == kindDeadline {
		i := slices.IndexFunc(r.Deadlines, func(d deadline) bool { return d.ID == msg.deadline })
		if i < 0 || r.Completed {
			return nothing(ignored) // cancelled, rescheduled, or fired already
		}
		if blocked {
			return nil, heldBack, nil // it stays pending, and fires after the parked message is resolved
		}
		d := r.Deadlines[i]
		if park != nil {
			return e.parked(in, &r, msg, park, now), parkedOut, nil
		}
		r.Deadlines = slices.Delete(r.Deadlines, i, i+1)
		h := e.t.deadlines[d.Name]
		if h == nil {
			return &r, handled, nil // a deadline this code no longer handles: it fires into nothing
		}
		payload, err := e.t.reg.DecodeValue(d.Payload.upcast())
		if err != nil {
			return nil, 0, err
		}
		return e.run(ctx, in, &r, msg, now, func(s *S, o *Output) error { return h.handle(ctx, s, payload, o) })
	}

	source, seq := msg.in.Source, msg.in.Sequence
	mark, seen := r.Marks[source]
	if (seen && seq <= mark) || (!msg.fromHeld && slices.ContainsFunc(r.Held, func(h heldMessage) bool {
		return h.Source == source && h.Sequence == seq
	})) || (!msg.unpark && r.Parked != nil && r.Parked.Message.Source == source && r.Parked.Message.Sequence == seq) {
		return nothing(duplicate)
	}
	if r.Completed {
		if !msg.fromHeld && !msg.unpark {
			return nil, ignored, nil
		}
		r.Marks[source] = seq
		return nothing(ignored)
	}

	if msg.kind == kindRejected {
		if blocked {
			return hold()
		}
		if park != nil {
			return e.parked(in, &r, msg, park, now), parkedOut, nil
		}
		r.Marks[source] = seq
		cmd, err := e.t.reg.DecodeValue(msg.in.Event.upcast())
		if err != nil {
			return nil, 0, err
		}
		h := e.t.rejected[typeOf(cmd)]
		if h == nil {
			return &r, handled, nil // recorded, so that it is fed back once
		}
		reason := &RejectedError{Command: msg.in.Command, Reason: msg.in.Reason}
		return e.run(ctx, in, &r, msg, now, func(s *S, o *Output) error { return h.handle(ctx, s, cmd, reason, o) })
	}

	values, err := e.decodeEvent(msg)
	if err != nil {
		return nil, 0, err
	}
	starts, anyOrder := false, false
	for _, v := range values {
		m := e.t.events[typeOf(v.Value)]
		starts = starts || (m != nil && m.starts)
		anyOrder = anyOrder || (m != nil && m.anyOrder)
	}
	started := in.exists && r.State.Type != ""
	early := !msg.in.Ordered && !anyOrder && ((seen && seq > mark+1) || (!seen && seq > 0))
	switch {
	case !started && !starts && !in.exists:
		return nothing(ignored)
	case blocked || early:
		return hold()
	case !started && !starts:
		r.Marks[source] = seq
		return nothing(ignored)
	case park != nil:
		return e.parked(in, &r, msg, park, now), parkedOut, nil
	}
	r.Marks[source] = seq
	return e.run(ctx, in, &r, msg, now, func(s *S, o *Output) error {
		for _, v := range values {
			if m := e.t.events[typeOf(v.Value)]; m != nil {
				if err := m.handle(ctx, s, v.Value, o); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// parked makes r the record of msg parked: nothing else changes, and the
// instance holds every later message behind it.
func (e *engine[S]) parked(in *instance[S], r *record, msg *message, park *parkedMessage, now time.Time) *record {
	p := *park
	p.Message, p.Deadline = msg.in, msg.deadline
	if was := in.rec.Parked; was != nil && msg.unpark {
		p.Attempts += was.Attempts
		p.Since = was.Since
	} else {
		p.Since = now
	}
	r.Parked = &p
	r.Handled.Kind = kindParked
	return r
}

// decodeEvent upcasts and decodes the event of msg: one value, or several
// when an upcaster splits it, all handled in one step.
func (e *engine[S]) decodeEvent(msg *message) ([]codec.Decoded, error) {
	if msg.values != nil {
		return msg.values, nil
	}
	ev := eventstore.Event{
		EventData: eventstore.EventData{ID: msg.in.EventID, Type: msg.in.Event.Type, SchemaVersion: msg.in.Event.Version,
			Data: msg.in.Event.Data, Metadata: msg.in.Metadata},
		StreamID: msg.in.Source, Version: msg.in.Sequence, Position: msg.in.Position,
	}
	return e.t.reg.Decode(ev)
}

// releasable returns the first held message that the instance can take
// now, or nil: none while a message is parked.
func (e *engine[S]) releasable(in *instance[S]) *message {
	if in.rec.Parked != nil {
		return nil
	}
	for _, h := range in.rec.Held {
		mark, seen := in.rec.Marks[h.Source]
		if h.Ordered || h.Kind == kindRejected || (seen && h.Sequence <= mark+1) || (!seen && h.Sequence == 0) || e.anyOrder(h) {
			kind := h.Kind
			if kind == "" {
				kind = kindEvent
			}
			return &message{kind: kind, in: h, fromHeld: true}
		}
	}
	return nil
}

// anyOrder reports whether a held event is of a type mapped to be handled
// in any order.
func (e *engine[S]) anyOrder(h heldMessage) bool {
	for _, m := range e.t.events {
		if m.anyOrder && m.name == h.Event.Type {
			return true
		}
	}
	return false
}
