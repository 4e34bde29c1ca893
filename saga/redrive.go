package saga

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// Redrive runs the messages of instance id again, from its step at version
// from on, through the current code: use it after a handler that decided
// wrong has been fixed. It returns what it did: how many messages it runs
// again, and, by command ID, which commands the re-run sent anew, which
// the bus absorbs as the first run's, which differ from what the first
// run carried out, and which it no longer sends (see [Redriven]). The
// latest Redrive stays in [Explanation.Redrive].
//
// The instance is set back, in one operator's step, to what the step
// before from left it: its state, the progress of its sources, its pending
// deadlines, held and parked messages, settled commands and completion.
// The messages that the steps from from on took in are then taken again,
// in their turn, as held messages are: the stored events are read again
// from their streams, from the first one taken (each stream's pending
// progress); the deliveries, whose payloads the records kept, are held
// again; and the rejections and failures of commands sent before from are
// held again, so that none is lost (those of commands sent from from on
// come back through the outbox, if the fixed code sends them again). An
// interrupted Redrive goes on at the instance's next message.
//
// Commands keep their IDs: a command's ID derives from the instance, the
// message it answers, the command's type and target, and its ordinal among
// the step's commands of that type and target (see [Output.Send]), not
// from the step's version, so the bus absorbs a command the first run
// already carried out, and a command the fixed code adds gets an ID of its
// own, unless it is of the type and to the aggregate of an earlier command
// and is sent before it (it then takes that one's ID). Deadlines pending
// before from are pending again and fire at once when they are overdue;
// those the re-run steps schedule keep their IDs too. A command the first
// run recorded and the fixed code no longer sends takes effect at most
// once: one the outbox sent already (or sends when it reaches the first
// run's record) is not undone, which is for the handlers to compensate;
// one that waited behind a parked command is dropped with that wait.
//
// A version past the latest step, an instance with no steps, or a step
// from from on whose delivery payload its record could not keep (see
// [MaxStepSize]) is an [*eventstore.InvalidArgumentError].
func (r *Runner[S]) Redrive(ctx context.Context, id string, from uint64) (Redriven, error) {
	var mark redriveMark
	err := r.operate(ctx, id, func(in *instance[S], rec *record) error {
		if from > in.version {
			return &eventstore.InvalidArgumentError{Stream: in.stream, Index: -1, Field: "redrive version",
				Reason: fmt.Sprintf("is %d, past the latest step %d of saga %q, instance %q", from, in.version, r.e.t.name, id)}
		}
		base, taken, err := r.redriven(ctx, in.stream, from, math.MaxUint64, false)
		if err != nil {
			return err
		}
		mark = redriveMark{Step: in.version + 1, From: from}
		duplicates := rec.Duplicates
		*rec = base
		rec.Duplicates = duplicates
		rec.Commands = nil
		rec.Handled = cause{Kind: kindRedriven, Message: envelope{Sequence: from}}
		for _, m := range taken {
			if m.kind() == kindEvent && base.Sources[m.Source].taken(m.Sequence) {
				continue // the step before from took it already: a history re-driven before, taking it again
			}
			retake(rec, m)
			mark.Messages++
		}
		rec.Redrive = &mark
		return nil
	})
	if err != nil {
		return Redriven{Messages: mark.Messages, Step: mark.Step, From: from}, err
	}
	in, err := r.e.read(ctx, id)
	if err != nil {
		return Redriven{Messages: mark.Messages, Step: mark.Step, From: from}, err
	}
	return r.redriveReport(ctx, in.stream, in.version, mark)
}

// retake puts message m, which a step being re-driven took in, back in
// rec's care: a stored event by its source's pending progress, anything
// else among the held messages (unless rec holds or parks it already).
func retake(rec *record, m envelope) {
	if m.Ordered && m.kind() == kindEvent {
		p, seen := rec.Sources[m.Source]
		if !seen || m.Sequence < p.Next {
			p.Next = m.Sequence
		}
		p.Pending, p.HeldTo = true, max(p.HeldTo, m.Sequence)
		rec.Sources[m.Source] = p
		return
	}
	key := m.key()
	if slices.ContainsFunc(rec.Held, func(h envelope) bool { return h.key() == key }) ||
		(rec.Parked != nil && rec.Parked.Message.key() == key) {
		return
	}
	rec.Held = append(rec.Held, m)
}

// redriven reads the history of stream from version from-1 up to (not
// including) version until (passing over the records it cannot read when
// lenient, refusing them otherwise), and returns
// the record the step before from left (an empty one when from is 0) and
// the messages that the steps from from on took in, first arrival first:
// events (handled, held or parked), and the rejections and failures of
// commands sent before from.
func (r *Runner[S]) redriven(ctx context.Context, stream string, from, until uint64, lenient bool) (record, []envelope, error) {
	base := record{Sources: make(map[string]progress)}
	var taken []envelope
	seen := make(map[string]bool)
	start := from
	if from > 0 {
		start = from - 1
	}
	for ev, err := range r.e.store.ReadStream(ctx, stream, eventstore.Forward(start)) {
		if err != nil {
			return record{}, nil, err
		}
		if ev.Version >= until {
			break
		}
		rec, err := decodeRecord(ev)
		if err != nil && lenient {
			continue
		}
		if err != nil {
			return record{}, nil, err
		}
		if ev.Version < from {
			base = (&instance[S]{rec: *rec}).next()
			continue
		}
		m, ok, err := takenIn(stream, ev.Version, rec, from)
		if err != nil {
			return record{}, nil, err
		}
		if !ok || seen[m.key()] {
			continue
		}
		seen[m.key()] = true
		taken = append(taken, m)
	}
	return base, taken, nil
}

// takenIn returns the message that step record rec (at version of
// stream) took in, with the payload it has no other home for, and whether
// it is one that Redrive from from takes again.
func takenIn(stream string, version uint64, rec *record, from uint64) (envelope, bool, error) {
	h := rec.Handled
	m := h.Message
	switch h.Kind {
	case kindEvent, kindHeld, kindParked, kindRejected:
	default:
		return envelope{}, false, nil // a deadline (pending again) or an operator's step
	}
	switch m.kind() {
	case kindDeadline:
		return envelope{}, false, nil
	case kindRejected, kindCommand:
		m.Since = h.At
		return m, m.Sent < from, nil
	}
	if m.Ordered {
		return m, true, nil
	}
	if m.Event == nil {
		// A held or parked delivery keeps its payload in the record's held
		// or parked message.
		key := m.key()
		if i := slices.IndexFunc(rec.Held, func(o envelope) bool { return o.key() == key }); i >= 0 {
			m = rec.Held[i]
		} else if rec.Parked != nil && rec.Parked.Message.key() == key {
			m = rec.Parked.Message
		}
	}
	if m.Event == nil {
		return envelope{}, false, &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "redrive version",
			Reason: fmt.Sprintf("step %d took in %s, whose payload its record could not keep; redrive from a later step", version, describe(m))}
	}
	m.Since = h.At
	return m, true, nil
}
