package saga

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
)

// send dispatches the commands that one step record (ev, an event of an
// instance stream) sends, in order, through the bus, with their recorded
// IDs: a re-send after a crash is absorbed by the bus's command-ID
// idempotency. A command its aggregate rejects is fed back to the
// instance as a step, exactly once (its handler is [OnRejected]'s). A
// command the instance already took a rejection for is not sent again, so
// that a rejection once fed back is final. Other failures are returned:
// the record is sent again, whole, later.
func (r *Runner[S]) send(ctx context.Context, ev eventstore.Event, rec *record) error {
	id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
	if !ok || len(rec.Commands) == 0 {
		return nil
	}
	if r.bus == nil {
		return fmt.Errorf("saga %q: instance %q has commands to send, and the runner has no command bus", r.e.t.name, id)
	}
	in, err := r.e.load(ctx, id)
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
		res, err := r.bus.Dispatch(ctx, command.Message{ID: c.ID, CorrelationID: ev.Metadata.CorrelationID, CausationID: ev.ID.String(), Command: cmd})
		switch {
		case err == nil:
			continue
		case !res.Rejected:
			return fmt.Errorf("saga %q, instance %q: sending command %s (%T): %w", r.e.t.name, id, c.ID, cmd, err)
		}
		r.e.log.InfoContext(ctx, "saga: a command was rejected; feeding it back to its instance",
			slog.String("saga", r.e.t.name), slog.String("instance", id), slog.String("command_id", c.ID),
			slog.String("command", c.Command.Type), slog.Any("reason", err))
		msg := &message{kind: kindRejected, in: heldMessage{Kind: kindRejected, Source: rejectionSource, Sequence: seq, Ordered: true,
			Event: c.Command, Command: c.ID, Reason: err.Error(), Metadata: ev.Metadata}}
		if _, err := r.e.process(ctx, id, msg); err != nil {
			return err
		}
	}
	return nil
}
