package saga

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/trusted"
)

// Operators act on what they saw: Retry and Skip name the parked message
// (by its [ParkedMessage.ID]) and Release the gap (by the sequence it
// waits for), and each refuses with a [*StaleError], changing nothing,
// when the instance no longer has it so: another operator acted first, or
// the instance moved on. What an action unblocks is drained through the
// instance's own steps, each stored before the next is read, so a crash in
// the middle leaves the rest waiting where it was, and a later event of a
// stream never overtakes a held one.

// Retry runs instance id's parked message again, the one named messageID
// (its [ParkedMessage.ID]). When it succeeds the instance goes on with the
// messages held behind it; when it fails again it stays parked, its
// attempts counted. A parked command (one the bus kept failing) is sent
// again, with the rest of its step's commands, by the outbox. An instance
// with nothing parked is a [*StaleError] that matches [ErrNotParked];
// one with another message parked, a [*StaleError].
func (r *Runner[S]) Retry(ctx context.Context, id, messageID string) (Outcome, error) {
	held, err := r.e.locks.Lock(ctx, r.e.t.Stream(id))
	if err != nil {
		return 0, err
	}
	defer held.Unlock()
	in, err := r.e.read(ctx, id)
	if err != nil {
		return 0, err
	}
	p, err := r.parked(in, "retry", messageID)
	if err != nil {
		return 0, err
	}
	if p.Message.kind() == kindCommand {
		err := r.operateLocked(ctx, id, func(in *instance[S], rec *record) error {
			p, err := r.parked(in, "retry", messageID)
			if err != nil {
				return err
			}
			if rec.Commands, err = r.remaining(ctx, in, p.Message, true); err != nil {
				return err
			}
			rec.Parked = nil
			rec.Handled = cause{Kind: kindRetried, Message: p.Message.reference()}
			return nil
		})
		return Handled, err
	}
	msg := heldOut(p.Message)
	msg.fromHeld, msg.unpark = false, true
	out, err := r.e.retried(ctx, id, msg)
	if err != nil {
		return Outcome(out), err
	}
	return Outcome(out), r.e.drain(ctx, id)
}

// Skip drops instance id's parked message, the one named messageID (its
// [ParkedMessage.ID]), without handling it: its source goes on after it,
// and the instance with the messages held behind it. A skipped deadline
// does not fire; a skipped rejection never reaches its handler; a skipped
// command is never sent (the rest of its step's commands are). An instance
// with nothing parked, or another message parked, is a [*StaleError] (see
// [Runner.Retry]).
func (r *Runner[S]) Skip(ctx context.Context, id, messageID string) error {
	return r.operate(ctx, id, func(in *instance[S], rec *record) error {
		p, err := r.parked(in, "skip", messageID)
		if err != nil {
			return err
		}
		m := p.Message
		rec.Parked = nil
		rec.Handled = cause{Kind: kindSkipped, Message: m.reference()}
		switch m.kind() {
		case kindDeadline:
			rec.Deadlines = slices.DeleteFunc(rec.Deadlines, func(d deadline) bool { return d.ID == m.Deadline })
		case kindEvent:
			rec.Sources[m.Source] = rec.Sources[m.Source].take(m.Sequence, m.Ordered)
		case kindRejected:
			rec.Settled = rec.Settled.add(m.Command, m.Sent)
		case kindCommand:
			rec.Settled = rec.Settled.add(m.Command, m.Sent)
			rec.Commands, err = r.remaining(ctx, in, m, false)
		}
		return err
	})
}

// Release gives up waiting for the missing messages of source that
// instance id's held deliveries wait for, at the sequence waitsFor (the
// [Gap.WaitsFor], or [HeldMessage.WaitsFor], the operator saw): the lowest
// held message of source becomes the next one, and the instance goes on
// from there. Use it for a gap that will never fill. A source with nothing
// held is an [*eventstore.InvalidArgumentError], and so is one whose held
// messages wait behind the instance's parked message rather than for a
// missing one (passing over it would drop it: Retry or Skip it); a gap
// that no longer waits for waitsFor (it filled, or was released) a
// [*StaleError].
func (r *Runner[S]) Release(ctx context.Context, id, source string, waitsFor uint64) error {
	return r.operate(ctx, id, func(in *instance[S], rec *record) error {
		var first envelope
		lowest, found := uint64(0), false
		for _, h := range rec.Held {
			if h.kind() == kindEvent && h.Source == source && (!found || h.Sequence < lowest) {
				first, lowest, found = h, h.Sequence, true
			}
		}
		p := rec.Sources[source]
		missing, gap := heldWait(rec, first, r.e.anyOrder)
		stale := &StaleError{Saga: r.e.t.name, Instance: id, Action: "release", Want: fmt.Sprintf("the gap of %q at %d", source, waitsFor),
			Now: fmt.Sprintf("nothing missing below %d", p.Next)}
		switch {
		case waitsFor < p.Next:
			return stale // the gap filled, or was released
		case !found:
			return &eventstore.InvalidArgumentError{Index: -1, Field: "source",
				Reason: fmt.Sprintf("%q has no message held in saga %q, instance %q", source, r.e.t.name, id)}
		case parkedBelow(rec, source, lowest):
			// Passing over it would drop it: the Retry after the fix would
			// find it taken.
			return &eventstore.InvalidArgumentError{Index: -1, Field: "source",
				Reason: fmt.Sprintf("saga %q, instance %q: what %q holds waits behind the parked message #%d: Retry or Skip it first",
					r.e.t.name, id, source, rec.Parked.Message.Sequence)}
		case !gap:
			return &eventstore.InvalidArgumentError{Index: -1, Field: "source",
				Reason: fmt.Sprintf("saga %q, instance %q: %q misses nothing: what it holds is taken when the instance goes on", r.e.t.name, id, source)}
		case missing != waitsFor:
			stale.Now = fmt.Sprintf("its gap at %d", missing)
			return stale
		}
		rec.Sources[source] = p.passTo(lowest)
		rec.Handled = cause{Kind: kindReleased, Message: envelope{Source: source, Sequence: lowest}}
		return nil
	})
}

// parked returns the parked message of in when it is the one named key.
func (r *Runner[S]) parked(in *instance[S], action, key string) (*parkedMessage, error) {
	p := in.rec.Parked
	if p == nil || p.Message.key() != key {
		return nil, r.e.stale(in, action, key)
	}
	return p, nil
}

// remaining returns the commands of the record that sent the failed
// command m, from it on (with it when from is set, after it otherwise),
// less those whose outcome instance in took already: the commands that a
// retry or a skip of m sends again, under their IDs.
func (r *Runner[S]) remaining(ctx context.Context, in *instance[S], m envelope, from bool) ([]sentCommand, error) {
	ev, found, err := r.e.storedEvent(ctx, in.stream, m.Sent)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: saga stream %q has no record %d, which sent command %s", eventstore.ErrCorrupt, in.stream, m.Sent, m.Command)
	}
	sender, err := decodeOutline(ev)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(sender.Commands, func(c sentCommand) bool { return c.ID == m.Command })
	if i < 0 {
		return nil, fmt.Errorf("%w: record %d of saga stream %q did not send command %s", eventstore.ErrCorrupt, m.Sent, in.stream, m.Command)
	}
	if !from {
		i++
	}
	var out []sentCommand
	for _, c := range sender.Commands[i:] {
		if !in.rec.Settled.has(c.ID) {
			out = append(out, c)
		}
	}
	return out, nil
}

// operate stores one operator's step on an instance, made by change from
// its latest record, then handles what the step released.
func (r *Runner[S]) operate(ctx context.Context, id string, change func(in *instance[S], rec *record) error) error {
	held, err := r.e.locks.Lock(ctx, r.e.t.Stream(id))
	if err != nil {
		return err
	}
	defer held.Unlock()
	return r.operateLocked(ctx, id, change)
}

// operateLocked is operate, for a caller that holds the instance's lock.
func (r *Runner[S]) operateLocked(ctx context.Context, id string, change func(in *instance[S], rec *record) error) error {
	for conflicts := 0; ; conflicts++ {
		in, err := r.e.read(ctx, id)
		if err != nil {
			return err
		}
		if !in.exists {
			return &eventstore.InvalidArgumentError{Index: -1, Field: "instance",
				Reason: fmt.Sprintf("saga %q has no instance %q", r.e.t.name, id)}
		}
		rec := in.next()
		if err := change(in, &rec); err != nil {
			return err
		}
		rec.Handled.At = r.e.now().UTC()
		key := "op/" + rec.Handled.Kind + "/" + rec.Handled.Message.key()
		data, err := encodeRecord(in.stream, in.version+1, key, &rec, eventstore.Metadata{})
		if err != nil {
			return err
		}
		if len(data.Data) > MaxStepSize && rec.Handled.Kind == kindRedriven {
			// A Redrive that holds again more deliveries than one record
			// keeps: refused before anything is written. (The other
			// operator's steps keep or shrink the record.)
			return &RecordSizeError{Saga: r.e.t.name, Instance: id, Stream: in.stream, Message: "the operator's " + rec.Handled.Kind + " step",
				Size: len(data.Data), Limit: MaxStepSize, Parts: largestParts(&rec)}
		}
		actx, op, traced := r.tel.startAppend(ctx, in.stream, trace.SpanContextFromContext(ctx).IsValid())
		op.Inject(&data.Metadata)
		telemetry.Fit(&data)
		res, err := r.e.store.Append(trusted.Writer(actx), in.stream, in.expected(), data)
		if traced {
			op.End(actx, in.version+1, err)
		}
		if err == nil && res.Duplicate {
			r.e.cache.Evict(in.stream)
			return r.e.drain(ctx, id)
		}
		if err == nil {
			r.e.stepped(in, in.version+1, &rec)
			return r.e.drain(ctx, id)
		}
		r.e.cache.Evict(in.stream)
		if !isConflict(err) || conflicts >= maxConflicts {
			return err
		}
	}
}
