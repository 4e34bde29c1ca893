package saga

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/failpoint"
)

// send dispatches the commands that one step record (ev, an event of an
// instance stream) sends, in order, through the bus, with their recorded
// IDs: a re-send after a crash is absorbed by the bus's command-ID
// idempotency. A command its aggregate rejects is fed back to the
// instance as a step, exactly once (its handler is [OnRejected]'s). The
// bus records the rejection in the aggregate's stream first, so that no
// re-send of the command ID, by this runner or another, ever succeeds
// after it; and a command the instance already took a rejection for is not
// sent again. Other failures are returned: the record is sent again,
// whole, later.
func (r *Runner[S]) send(ctx context.Context, ev eventstore.Event, rec *record) error {
	id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
	if !ok || len(rec.Commands) == 0 {
		return nil
	}
	if r.bus == nil {
		return fmt.Errorf("saga %q: instance %q has commands to send, and the runner has no command bus", r.e.t.name, id)
	}
	in, err := r.e.peek(ctx, id)
	if err != nil {
		return err
	}
	rejectedThrough := in.rec.Marks[rejectionSource]
	for i, c := range rec.Commands {
		seq := rejectionSeq(ev.Version, i)
		if seq <= rejectedThrough {
			continue // rejected and fed back before a crash: that is final
		}
		v, err := r.e.t.reg.DecodeValue(c.Command.upcast())
		if err != nil {
			return fmt.Errorf("saga %q, instance %q: command %s: %w", r.e.t.name, id, c.ID, err)
		}
		cmd, ok := v.(command.Command)
		if !ok {
			return fmt.Errorf("saga %q, instance %q: command %s decodes to %T, which is not a command", r.e.t.name, id, c.ID, v)
		}
		r.sent.Add(1)
		// RecordRejection: a rejection is this command ID's final outcome
		// only if it is recorded where every later dispatch finds it. Fed
		// back but unrecorded, another runner's re-send (or this one's,
		// after a crash before the feed-back) could succeed on a changed
		// aggregate. A re-send that meets the record is rejected again
		// (a RecordedRejectionError) and fed back, which the instance drops
		// as a duplicate by its rejection sequence.
		res, err := r.bus.Dispatch(ctx, command.Message{ID: c.ID, CorrelationID: ev.Metadata.CorrelationID, CausationID: ev.ID.String(),
			Command: cmd, RecordRejection: true})
		hit(failpoint.OutboxAfterDispatch)
		switch {
		case err == nil:
			continue
		case !res.Rejected:
			return fmt.Errorf("saga %q, instance %q: sending command %s (%T): %w", r.e.t.name, id, c.ID, cmd, err)
		}
		// A rejection is the domain's answer, kept in the instance's
		// history (Runner.Explain): worth a debug line, not one at info
		// per declined payment.
		r.e.log.DebugContext(ctx, "saga: a command was rejected; feeding it back to its instance",
			slog.String("saga", r.e.t.name), slog.String("instance", id), slog.String("command_id", c.ID),
			slog.String("command", c.Command.Type), slog.Any("reason", err))
		if _, err := r.e.process(ctx, id, rejection(ev, i, c, err)); err != nil {
			return err
		}
	}
	return nil
}

// rejection is the message that feeds back to an instance the rejection of
// the index-th command of its step record ev.
func rejection(ev eventstore.Event, index int, c sentCommand, reason error) *message {
	return &message{kind: kindRejected, in: heldMessage{Kind: kindRejected, Source: rejectionSource, Sequence: rejectionSeq(ev.Version, index),
		Ordered: true, Event: c.Command, Command: c.ID, Reason: reason.Error(), Metadata: ev.Metadata}}
}

// Reject feeds back to instance id the rejection of command commandID, one
// that a step of the instance sent, exactly as the outbox does when the
// command's aggregate refuses it: the instance's [OnRejected] handler runs
// once, as a step; a second Reject of the same command is a Duplicate. Use
// it when a saga's commands are carried out elsewhere (another service),
// and in tests. An ID that no step of the instance sent is an
// [*eventstore.InvalidArgumentError].
func (r *Runner[S]) Reject(ctx context.Context, id, commandID string, reason error) (Outcome, error) {
	if reason == nil {
		return 0, &eventstore.InvalidArgumentError{Index: -1, Field: "rejection reason", Reason: "is nil"}
	}
	for ev, err := range r.e.store.ReadStream(ctx, r.e.t.Stream(id), eventstore.Forward(0)) {
		if err != nil {
			return 0, err
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return 0, err
		}
		for i, c := range rec.Commands {
			if c.ID == commandID {
				out, err := r.e.process(ctx, id, rejection(ev, i, c, reason))
				return Outcome(out), err
			}
		}
	}
	return 0, &eventstore.InvalidArgumentError{Index: -1, Field: "command ID",
		Reason: fmt.Sprintf("%q was not sent by saga %q, instance %q", commandID, r.e.t.name, id)}
}
