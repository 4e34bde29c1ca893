package saga

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/sagaharness"
)

// HandleStored steps one stored event as the runner's own consumer of the
// store would: the event's instance handles it (duplicates dropped by the
// stream's watermark, a parked instance holding it back), and when
// HandleStored returns nil the outcome is durable. It is for callers that
// read the store themselves rather than through [Runner.Run]: a bridge
// that carries the store's events over a broker, a persistent subscription
// of their own, a harness that injects faults between the store and the
// runner.
//
// Such a caller owes the runner what its own subscription guarantees: the
// events of one stream in their stream order, each at least once. A
// redelivery of an older event is fine at any time; an event handed over
// before an earlier event of its stream that the saga maps makes the
// instance take the earlier one for a duplicate: unlike [Runner.Deliver],
// which holds a later sequence until the earlier ones arrive, HandleStored
// does not wait. Events of different streams may come in any order.
//
// An event of a type the saga does not map (including its own step
// records) is Ignored. One that cannot reach an instance (it does not
// decode, or its mapping finds no instance ID) is a [*HandlerError] and
// nothing is stored: the caller parks it wherever its consumer keeps
// failures.
func (r *Runner[S]) HandleStored(ctx context.Context, ev eventstore.Event) (Outcome, error) {
	if err := storekit.ValidateStream(ev.StreamID); err != nil {
		return 0, err
	}
	if !r.e.t.storedTypes()[ev.Type] {
		r.e.stats.count(ignored)
		r.tel.counted(ctx, ignored)
		return Ignored, nil
	}
	id, msg, problem := r.e.storedMessage(ev)
	switch {
	case problem != nil:
		return 0, &HandlerError{Saga: r.e.t.name, Attempts: 1, Err: problem,
			Message: fmt.Sprintf("event %s #%d of %q", ev.Type, ev.Version, ev.StreamID)}
	case msg == nil:
		r.e.stats.count(ignored)
		r.tel.counted(ctx, ignored)
		return Ignored, nil
	}
	out, err := r.e.process(ctx, id, msg)
	return Outcome(out), err
}

// storedMessage turns a stored event into the message its instance
// handles, and that instance's ID. msg is nil when the saga maps none of
// the types the event decodes to, which an upcaster may have turned it
// into; problem is set when the event cannot reach an instance: it does
// not decode, or its mapping finds no instance.
func (e *engine[S]) storedMessage(ev eventstore.Event) (id string, msg *message, problem error) {
	values, err := e.t.reg.Decode(ev)
	if err != nil {
		return "", nil, err
	}
	var m *eventMapping[S]
	var v any
	for _, d := range values {
		if m = e.t.events[typeOf(d.Value)]; m != nil {
			v = d.Value
			break
		}
	}
	if m == nil {
		return "", nil, nil
	}
	if id, err = instanceOf(m, v, Origin{Source: ev.StreamID, Sequence: ev.Version, Metadata: ev.Metadata, Stored: true}); err != nil {
		return "", nil, err
	}
	return id, &message{event: &ev, values: values,
		in: envelope{Source: ev.StreamID, Sequence: ev.Version, Ordered: true, EventID: ev.ID, Type: ev.Type, Position: ev.Position},
		md: eventstore.Metadata{CorrelationID: ev.Metadata.CorrelationID, CausationID: ev.ID.String()}}, nil
}

// Harnesses play the outbox by hand through internal/sagaharness.
func init() {
	sagaharness.Register(func(runner any) func(ctx context.Context, ev eventstore.Event) error {
		r, ok := runner.(interface {
			sendStored(ctx context.Context, ev eventstore.Event) error
		})
		if !ok {
			return func(context.Context, eventstore.Event) error {
				return fmt.Errorf("%w: %T is no saga runner", eventstore.ErrInvalidArgument, runner)
			}
		}
		return r.sendStored
	})
}

// sendStored does for one stored step record of this saga type what the
// runner's outbox does (see sagaharness.SendStored). An event that is not
// a step record of this saga type is an [*eventstore.InvalidArgumentError].
func (r *Runner[S]) sendStored(ctx context.Context, ev eventstore.Event) error {
	id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
	if !ok || ev.Type != recordType {
		return &eventstore.InvalidArgumentError{Stream: ev.StreamID, Index: -1, Field: "event",
			Reason: fmt.Sprintf("%s #%d is not a step record of saga %q", ev.Type, ev.Version, r.e.t.name)}
	}
	return r.sendRecord(ctx, id, ev)
}

// sendRecord is the outbox's work on one step record ev of instance id:
// tell the indexes, send its commands, and, when the record left messages
// that the instance may take now, drain them. That last part makes the
// drain that follows an operator's action (or any step) survive the crash
// of the process that stored the step: the outbox of whichever process
// reads the record next goes on with it.
func (r *Runner[S]) sendRecord(ctx context.Context, id string, ev eventstore.Event) error {
	rec, err := decodeOutline(ev)
	if err != nil {
		return err
	}
	return r.sendOutline(ctx, id, ev, rec)
}

// sendOutline is sendRecord for record ev read already, as decodeOutline
// reads it: the outbox reads no payload but its commands'.
func (r *Runner[S]) sendOutline(ctx context.Context, id string, ev eventstore.Event, rec *record) error {
	r.observe(id, ev.Version, rec)
	if err := r.send(ctx, ev, rec); err != nil {
		return err
	}
	if rec.Parked == nil && (len(rec.Held) > 0 || len(pendingSources(rec)) > 0) {
		return r.e.resume(ctx, id, ev.Version)
	}
	return nil
}

// LoadDeadlines reads the pending deadlines of every instance from their
// latest steps in the store into the runner's deadline index, for the
// segments whose index is not whole yet (all of them, the first time);
// later calls read nothing. Run, CatchUp and [Runner.FireDue] do it, so no
// caller needs to; an operator's process calls it to see, in
// [Runner.Parked], [Runner.Gaps] and Stats, what the saga's records leave
// stuck.
func (r *Runner[S]) LoadDeadlines(ctx context.Context) error {
	return r.loadDeadlines(ctx)
}
