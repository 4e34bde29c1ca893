package saga

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// Redrive runs the messages of instance id again, from its step at version
// from on, through the current code: use it after a handler that decided
// wrong has been fixed. It returns how many messages it ran again.
//
// The instance is set back, in one operator's step, to what the step
// before from left it: its state, watermarks, pending deadlines, held and
// parked messages, and completion. The events that the steps from from on
// handled, held or parked are held in that same step, in the order they
// first arrived, and are then handled in their turn, as any held message
// is; so an interrupted Redrive goes on at the instance's next message.
//
// Commands keep their IDs: a command's ID derives from the instance and the
// message it answers, not from the step's version, so the bus absorbs a
// command the first run already carried out and returns its recorded
// outcome. A recorded rejection comes back through the outbox and is fed
// to the instance again; rejections fed in with [Runner.Reject] are not
// replayed. Deadlines pending before from are pending again and fire at
// once when they are overdue; those the re-run steps schedule keep their
// IDs too. What the first run sent and the fixed code no longer sends is
// not undone: that is for the handlers to compensate.
//
// A version past the latest step, or an instance with no steps, is an
// [*eventstore.InvalidArgumentError].
func (r *Runner[S]) Redrive(ctx context.Context, id string, from uint64) (int, error) {
	rerun := 0
	err := r.operate(ctx, id, func(in *instance[S], rec *record) error {
		if from > in.version {
			return &eventstore.InvalidArgumentError{Stream: in.stream, Index: -1, Field: "redrive version",
				Reason: fmt.Sprintf("is %d, past the latest step %d of saga %q, instance %q", from, in.version, r.e.t.name, id)}
		}
		base, messages, err := r.redriven(ctx, in.stream, from)
		if err != nil {
			return err
		}
		duplicates := rec.Duplicates
		*rec = base
		rec.Duplicates = duplicates
		rec.Commands = nil
		rec.Handled = cause{Kind: kindRedriven, Sequence: from}
		for _, h := range messages {
			// The step before from may hold or have parked some of them
			// already (held early, their step came later): they run in their
			// turn from there.
			if !slices.ContainsFunc(rec.Held, func(o heldMessage) bool { return o.Source == h.Source && o.Sequence == h.Sequence }) &&
				(rec.Parked == nil || rec.Parked.Message.Source != h.Source || rec.Parked.Message.Sequence != h.Sequence) {
				rec.Held = append(rec.Held, h)
			}
		}
		rerun = len(messages)
		return nil
	})
	return rerun, err
}

// redriven reads the history of stream from version from-1 on, and returns
// the record the step before from left (an empty one when from is 0) and
// the events that the steps from from on took in, first arrival first.
func (r *Runner[S]) redriven(ctx context.Context, stream string, from uint64) (record, []heldMessage, error) {
	base := record{Marks: make(map[string]uint64)}
	var messages []heldMessage
	start := from
	if from > 0 {
		start = from - 1
	}
	for ev, err := range r.e.store.ReadStream(ctx, stream, eventstore.Forward(start)) {
		if err != nil {
			return record{}, nil, err
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return record{}, nil, err
		}
		if ev.Version < from {
			base = (&instance[S]{rec: *rec}).next()
			continue
		}
		h := rec.Handled
		taken := h.Kind == kindEvent || h.Kind == kindHeld || h.Kind == kindParked
		if !taken || h.Event == nil || h.Command != "" {
			continue // a deadline (pending again), a rejection (fed again by the outbox), or an operator's step
		}
		if slices.ContainsFunc(messages, func(m heldMessage) bool { return m.Source == h.Source && m.Sequence == h.Sequence }) {
			continue
		}
		messages = append(messages, heldMessage{Kind: kindEvent, Source: h.Source, Sequence: h.Sequence,
			Ordered: h.Ordered || !h.Position.IsZero(), EventID: h.EventID, Position: h.Position,
			Event: *h.Event, Metadata: h.Metadata, Since: h.At})
	}
	return base, messages, nil
}
