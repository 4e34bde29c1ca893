package saga

import (
	"context"
	"slices"
	"time"
)

// decision is the record a step is deciding, and what it knows about it.
type decision struct {
	r record
	// version is the version the record is appended at.
	version uint64
	now     time.Time
	// changed says the record differs from the loaded one in what it keeps
	// (a message taken out of the held ones, a parked message cleared, a
	// source's progress): a step that handles nothing must still store it.
	changed bool
}

// decide builds the next record of instance in for msg, or returns a nil
// record when there is nothing to store (a duplicate, an ignored message).
// herr is the handler's failure (or a message that cannot be handled);
// nothing is stored then. err is the store's, when deciding had to read
// it. park, when set, records msg as parked instead of handling it.
func (e *engine[S]) decide(ctx context.Context, in *instance[S], msg *message, park *parkedMessage) (rec *record, out outcome, herr, err error) {
	d := &decision{r: in.next(), now: e.now().UTC()}
	if in.exists {
		d.version = in.version + 1
	}
	r := &d.r
	r.Handled = cause{Kind: msg.kind(), Message: msg.in, At: d.now}
	key := msg.key()
	if msg.fromHeld {
		if i := slices.IndexFunc(r.Held, func(h envelope) bool { return h.key() == key }); i >= 0 {
			r.Held, d.changed = slices.Delete(r.Held, i, i+1), true
		}
	}
	isParked := r.Parked != nil && r.Parked.Message.key() == key
	if msg.unpark {
		if !isParked {
			return nil, 0, nil, e.stale(in, "retry", key)
		}
		r.Parked, d.changed = nil, true // whatever this step does with it, it is no longer parked
	}
	if msg.pass {
		return e.pass(d, msg)
	}
	blocked := r.Parked != nil
	seen := !msg.unpark && (isParked || slices.ContainsFunc(r.Held, func(h envelope) bool { return h.key() == key }))

	switch msg.kind() {
	case kindDeadline:
		i := slices.IndexFunc(r.Deadlines, func(dl deadline) bool { return dl.ID == msg.in.Deadline })
		switch {
		case i < 0:
			return d.nothing(ignored) // cancelled, rescheduled, or fired already
		case r.Deadlines[i].At.After(d.now):
			// Not due by the record: the index had an earlier time for this
			// ID (another process re-armed it, by a Redrive say, and this
			// one has not read that step yet). It stays pending, and the
			// index learns the record's time.
			if e.stored != nil {
				e.stored(in.id, in.version, &in.rec)
			}
			return d.nothing(ignored)
		case blocked:
			return nil, heldBack, nil, nil // it stays pending, and fires after the parked message is resolved
		case park != nil:
			return d.parked(in.rec.Parked, msg, park), parkedOut, nil, nil
		}
		dl := r.Deadlines[i]
		r.Deadlines = slices.Delete(r.Deadlines, i, i+1)
		h := e.t.deadlines[dl.Name]
		if h == nil {
			return r, handled, nil, nil // a deadline this code no longer handles: it fires into nothing
		}
		payload, err := e.t.reg.DecodeValue(dl.Payload.upcast())
		if err != nil {
			return nil, 0, err, nil
		}
		return e.run(ctx, in, d, msg, func(s *S, o *Output) error { return h.handle(ctx, s, payload, o) })

	case kindRejected, kindCommand:
		done, err := e.isSettled(ctx, in, msg.in.Command, msg.in.Sent)
		switch {
		case err != nil:
			return nil, 0, nil, err
		case done || seen:
			return d.nothing(duplicate)
		case msg.kind() == kindRejected && r.Completed && msg.in.Sent < r.CompletedAt:
			// Sent before the step that completed the instance: it ended
			// without waiting for this command's answer. (A command that
			// failed for good parks the instance, complete or not: it is no
			// answer, but an incident an operator decides on.)
			return d.nothing(ignored)
		case blocked:
			return d.hold(msg)
		case msg.kind() == kindCommand:
			// A command the bus kept failing without a rejection: the
			// instance parks on it, until an operator retries or skips it.
			if park == nil {
				park = &parkedMessage{Error: msg.in.Reason, Attempts: 1}
			}
			return d.parked(in.rec.Parked, msg, park), parkedOut, nil, nil
		case park != nil:
			return d.parked(in.rec.Parked, msg, park), parkedOut, nil, nil
		}
		r.Settled = r.Settled.add(msg.in.Command, msg.in.Sent)
		cmd, herr, err := e.rejectedCommand(ctx, in, msg)
		if herr != nil || err != nil {
			return nil, 0, herr, err
		}
		h := e.t.rejected[typeOf(cmd)]
		if h == nil {
			return r, handled, nil, nil // recorded, so that it is taken once
		}
		reason := &RejectedError{Command: msg.in.Command, Reason: msg.in.Reason, Code: msg.in.ReasonCode,
			registered: e.t.reg.ErrorOf(msg.in.ReasonCode, msg.in.Reason).Err}
		return e.run(ctx, in, d, msg, func(s *S, o *Output) error { return h.handle(ctx, s, cmd, reason, o) })
	}

	source, seq := msg.in.Source, msg.in.Sequence
	p := r.Sources[source]
	if !msg.unpark && (seen || p.taken(seq) || (msg.in.Ordered && !msg.pending && p.waits(seq))) {
		return d.nothing(duplicate)
	}
	if r.Completed {
		if msg.fromHeld || msg.unpark || msg.pending {
			d.take(msg, p)
		}
		return d.nothing(ignored)
	}
	values, herr, err := e.decodeEvent(ctx, msg)
	switch {
	case err != nil:
		return nil, 0, nil, err
	case herr != nil && park != nil:
		// A message this code cannot read (a type renamed or changed
		// without its upcaster deployed) parks as it is: its failure will
		// not change until new code is, and nothing its type would say
		// about holding it can be known.
		return d.parked(in.rec.Parked, msg, park), parkedOut, nil, nil
	case herr != nil:
		return nil, 0, herr, nil
	}
	starts, anyOrder := false, false
	for _, v := range values {
		m := e.t.events[typeOf(v.Value)]
		starts = starts || (m != nil && m.starts)
		anyOrder = anyOrder || (m != nil && m.anyOrder)
	}
	started := in.exists && r.State.Type != ""
	// A delivery waits for the gap below it, unless its type may come in
	// any order and its source has room above its watermark. A stored
	// event waits behind an earlier event of its stream that waits.
	early := !msg.in.Ordered && seq > p.Next && !(anyOrder && !p.full())
	behind := msg.in.Ordered && p.Pending && !msg.pending && !msg.unpark
	// An instance set back to before its start (an interrupted Redrive
	// from its first step) has its start waiting among its held messages
	// or pending sources: a message that cannot start it waits too, for
	// the drain that takes the start first. (Out of the drain itself, the
	// start was looked for first, so one taken now has none to wait for.)
	restarting := !started && !starts && in.exists && !msg.fromHeld && !msg.pending && waiting(r)
	switch {
	case !started && !starts && !in.exists && !early:
		return d.nothing(ignored)
	case blocked || early || behind || restarting:
		// An early delivery is held even for an instance that has not
		// started: the message before it may be the one that starts it.
		return d.hold(msg)
	case !started && !starts:
		d.take(msg, p)
		return d.nothing(ignored)
	case park != nil:
		return d.parked(in.rec.Parked, msg, park), parkedOut, nil, nil
	}
	d.take(msg, p)
	return e.run(ctx, in, d, msg, func(s *S, o *Output) error {
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

// nothing is the decision of a message that changes nothing: no record,
// unless taking it changed what the record keeps.
func (d *decision) nothing(o outcome) (*record, outcome, error, error) {
	if d.changed {
		d.r.Handled.Kind = kindReleased
		d.r.Handled.Message = d.r.Handled.Message.reference()
		return &d.r, o, nil, nil
	}
	return nil, o, nil, nil
}

// take records the event of msg as taken from its source: a pending
// source's last event found by the drain ends its waiting.
func (d *decision) take(msg *message, p progress) {
	p = p.take(msg.in.Sequence, msg.in.Ordered)
	if msg.pending && msg.last && p.HeldTo <= msg.in.Sequence {
		// The drain read no later event of the stream for the instance,
		// and no step held one since its read (a hold raises HeldTo): the
		// waiting ends. Otherwise the drain reads the stream again.
		p.Pending, p.HeldTo = false, 0
	}
	d.r.Sources[msg.in.Source] = p
	d.changed = true
}

// hold keeps msg for later: a stored event by its source's progress, which
// is read again from the store; a delivery or a rejection in the held
// ones. A hold is always stored, even when its source was pending already,
// so that a step of another process that read the instance before it (the
// drain that empties that source) conflicts with it, and reads the
// source again.
func (d *decision) hold(msg *message) (*record, outcome, error, error) {
	r := &d.r
	if msg.in.Ordered && msg.kind() == kindEvent {
		p, seen := r.Sources[msg.in.Source]
		if !seen {
			p.Next = msg.in.Sequence
		}
		p.Pending, p.HeldTo = true, max(p.HeldTo, msg.in.Sequence)
		r.Sources[msg.in.Source] = p
	} else {
		h := msg.in
		h.Since = d.now
		if h.kind() != kindEvent {
			h.Reason = clip(h.Reason, maxHeldReasonLen)
		}
		r.Held = append(r.Held, h)
	}
	r.Handled.Kind = kindHeld
	r.Handled.Message = msg.in.reference()
	return r, heldBack, nil, nil
}

// parked makes the record that of msg parked: nothing else changes, and
// the instance holds every later message behind it.
func (d *decision) parked(was *parkedMessage, msg *message, park *parkedMessage) *record {
	r := &d.r
	p := *park
	p.Message = msg.in
	if was != nil && msg.unpark {
		p.Attempts += was.Attempts
		p.Since = was.Since
	} else {
		p.Since = d.now
	}
	r.Parked = &p
	r.Handled.Kind = kindParked
	r.Handled.Message = msg.in.reference()
	return r
}

// pass ends the waiting of a pending source that the drain found has
// nothing more for the instance: its progress moves past what the drain
// read.
func (e *engine[S]) pass(d *decision, msg *message) (*record, outcome, error, error) {
	p, ok := d.r.Sources[msg.in.Source]
	if !ok || !p.Pending {
		return d.nothing(ignored)
	}
	if p.HeldTo >= msg.in.Sequence {
		// A step held an event of the stream that the drain's read did not
		// reach: the waiting goes on, and the drain reads again.
		p.Next = max(p.Next, msg.in.Sequence)
		d.r.Sources[msg.in.Source] = p
		d.changed = true
		return d.nothing(ignored)
	}
	p = p.passTo(msg.in.Sequence)
	p.Pending, p.HeldTo = false, 0
	d.r.Sources[msg.in.Source] = p
	d.changed = true
	return d.nothing(ignored)
}

// reference is the envelope without the payload that a record keeps
// elsewhere (in its held or parked message), or that has a home of its
// own (a stored event).
func (m envelope) reference() envelope {
	m.Event, m.Metadata = nil, nil
	return m
}

// waiting reports whether r keeps messages for the drain: held ones, or
// stored events in pending sources.
func waiting(r *record) bool { return len(r.Held) > 0 || len(pendingSources(r)) > 0 }
