package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// send dispatches the commands that one step record (ev, an event of an
// instance stream) sends, in order, through the bus, with their recorded
// IDs: a re-send after a crash is absorbed by the bus's command-ID
// idempotency. A command its aggregate rejects is fed back to the
// instance as a step, exactly once (its handler is [OnRejected]'s). The
// bus records the rejection in the aggregate's stream first, so that no
// re-send of the command ID, by this runner or another, ever succeeds
// after it; and a command whose outcome the instance took already is not
// sent again.
//
// A command the bus keeps failing without a rejection, for a reason of its
// own (it does not decode, its aggregate panics, its ID was used by
// another command: see ownFailures), parks its instance, with the failure,
// and the rest of its record's commands wait for an operator to retry or
// skip it; the other instances go on. Any other failure (the store
// unavailable, a race lost too often, the context ending) is returned:
// the record is sent again, whole, later.
func (r *Runner[S]) send(ctx context.Context, ev eventstore.Event, rec *record) error {
	id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
	if !ok || len(rec.Commands) == 0 {
		return nil
	}
	if r.bus == nil {
		return fmt.Errorf("saga %q: instance %q has commands to send, and the runner has no command bus", r.e.t.name, id)
	}
	// The settled check must see at least this record: on an older view
	// (another process re-drove the instance since), a command the re-run
	// sends again would look settled by the history it replaced.
	in, err := r.e.peek(ctx, id, ev.Version)
	if err != nil && !errors.Is(err, eventstore.ErrCorrupt) {
		return err
	}
	var isSettled func(id string, sent uint64) (bool, error)
	if in != nil {
		isSettled = r.e.settledCheck(ctx, in)
	}
	for _, c := range rec.Commands {
		if isSettled != nil {
			done, err := isSettled(c.ID, ev.Version)
			if err != nil && !errors.Is(err, eventstore.ErrCorrupt) {
				return err
			}
			if done {
				continue // its outcome was taken before a crash: that is final
			}
		}
		// The send is a span of its own, linked to the step that recorded
		// the command; the bus's dispatch is its child, and so is the step
		// that takes the command's rejection or failure back.
		sctx, span := r.tel.startSend(ctx, id, ev, c)
		res := r.dispatch(sctx, id, ev, c)
		span.end(sctx, res.outcome, res.attempts, res.cause)
		if res.err != nil {
			return res.err
		}
		back := res.back
		if back == nil {
			continue
		}
		if _, err := r.e.process(sctx, id, back); err != nil {
			return err
		}
		if back.kind() == kindCommand {
			return nil // the instance is parked on it
		}
	}
	return nil
}

// dispatched is what became of one recorded command the outbox sent.
type dispatched struct {
	// back is what to feed back to the instance: its rejection, or its
	// failure for good; nil when the command was carried out.
	back *message
	// err is a failure that may pass: the record is sent again later.
	err error
	// outcome, attempts and cause (the rejection, or the failure) are
	// what the send's span and metrics say.
	outcome  sendOutcome
	attempts int
	cause    error
}

// dispatch sends one recorded command of instance id's record ev, and
// returns what became of it (see dispatched).
func (r *Runner[S]) dispatch(ctx context.Context, id string, ev eventstore.Event, c sentCommand) dispatched {
	failed := func(err error, attempts int) dispatched {
		return dispatched{back: commandFailed(ev, c, err), outcome: sendFailed, attempts: attempts, cause: err}
	}
	v, err := r.e.t.reg.DecodeValue(c.Command.upcast())
	if err != nil {
		return failed(fmt.Errorf("the recorded command does not decode: %w", err), 0)
	}
	cmd, ok := v.(command.Command)
	if !ok {
		return failed(fmt.Errorf("the recorded command decodes to %T, which is not a command", v), 0)
	}
	for attempt := 1; ; attempt++ {
		r.sent.Add(1)
		res, err := r.bus.Dispatch(ctx, command.Message{ID: c.ID, CorrelationID: ev.Metadata.CorrelationID, CausationID: ev.ID.String(),
			Command: cmd, RecordRejection: true})
		hit(failpoint.OutboxAfterDispatch)
		switch {
		case err == nil && res.Duplicate:
			return dispatched{outcome: sendDuplicate, attempts: attempt}
		case err == nil:
			return dispatched{outcome: sendSent, attempts: attempt}
		case res.Rejected:
			// A rejection is the domain's answer, kept in the instance's
			// history (Runner.Explain): worth a debug line, not one at info
			// per declined payment.
			r.e.log.DebugContext(ctx, "saga: a command was rejected; feeding it back to its instance",
				slog.String(telemetry.LogSaga, r.e.t.name), slog.String(telemetry.LogInstance, id), slog.String(telemetry.LogCommandID, c.ID),
				slog.String(telemetry.LogCommandType, c.Command.Type), slog.Any("reason", err))
			return dispatched{back: rejection(ev, c, err, r.rejectionCode(err)), outcome: sendRejected, attempts: attempt, cause: err}
		case !commandsOwn(err) || ctx.Err() != nil:
			err = fmt.Errorf("saga %q, instance %q: sending command %s (%T): %w", r.e.t.name, id, c.ID, cmd, err)
			return dispatched{err: err, outcome: sendFailed, attempts: attempt, cause: err}
		case attempt >= r.e.attempts:
			r.e.log.WarnContext(ctx, "saga: a command keeps failing without a rejection; its instance is parked on it",
				slog.String(telemetry.LogSaga, r.e.t.name), slog.String(telemetry.LogInstance, id), slog.String(telemetry.LogCommandID, c.ID),
				slog.String(telemetry.LogCommandType, c.Command.Type), slog.Int("attempts", attempt), slog.Any(telemetry.LogError, err))
			return failed(err, attempt)
		}
		if err := backoff.Wait(ctx, r.e.retry.Delay(attempt)); err != nil {
			return dispatched{err: err, outcome: sendFailed, attempts: attempt, cause: err}
		}
	}
}

// ownFailures are the failures that belong to a command itself, which no
// retry later changes: it is malformed or routed nowhere, its ID was used
// by another command, its aggregate panics or cannot be loaded (a stored
// event it cannot decode or apply). Every other failure (the store
// unavailable, a connection lost, a race lost too often) may pass, and is
// the batch's to retry.
var ownFailures = []error{
	eventstore.ErrInvalidArgument, eventstore.ErrCorrupt,
	command.ErrNoRoute, command.ErrCommandIDReused,
	aggregate.ErrPanicked, aggregate.ErrApplyFailed, aggregate.ErrUnknownEvent, aggregate.ErrInvalidType,
	codec.ErrUnknownType, codec.ErrVersionTooNew, codec.ErrNoUpcastPath, codec.ErrUndecodable, codec.ErrUpcastFailed,
	codec.ErrUnexpectedType, codec.ErrUnregisteredType, codec.ErrNilValue,
}

// commandsOwn reports whether err is a failure of the command itself (see
// ownFailures), and not one that may pass by itself.
func commandsOwn(err error) bool {
	if errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, command.ErrContention) {
		return false
	}
	for _, target := range ownFailures {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// rejection is the message that feeds back to an instance the rejection of
// command c of its step record ev; code is the code of the reason's error.
func rejection(ev eventstore.Event, c sentCommand, reason error, code string) *message {
	return &message{in: envelope{Kind: kindRejected, Command: c.ID, Type: c.Command.Type, Sent: ev.Version, Reason: clipReason(reason.Error()), ReasonCode: code},
		command: &c.Command, md: eventstore.Metadata{CorrelationID: ev.Metadata.CorrelationID, CausationID: c.ID}}
}

// rejectionCode returns the code of a rejection's error: the one the
// saga's codec registered for it, or else the one the bus recorded it with.
func (r *Runner[S]) rejectionCode(reason error) string {
	if code := r.e.t.reg.ErrorCode(reason); code != "" {
		return code
	}
	var rec *command.RecordedRejectionError
	if errors.As(reason, &rec) {
		return rec.Code
	}
	return ""
}

// commandFailed is the message that parks an instance on command c of its
// step record ev, which failed for good without a rejection.
func commandFailed(ev eventstore.Event, c sentCommand, err error) *message {
	return &message{in: envelope{Kind: kindCommand, Command: c.ID, Type: c.Command.Type, Sent: ev.Version, Reason: clipReason(err.Error())},
		md: eventstore.Metadata{CorrelationID: ev.Metadata.CorrelationID, CausationID: c.ID}}
}

// Reject feeds back to instance id the rejection of command commandID, one
// that a step of the instance sent, exactly as the outbox does when the
// command's aggregate refuses it: the instance's [OnRejected] handler runs
// once, as a step; a second Reject of the same command is a Duplicate,
// whatever the order of the rejections. Use it when a saga's commands are
// carried out elsewhere (another service), and in tests. An ID that no step
// of the instance sent is an [*eventstore.InvalidArgumentError].
func (r *Runner[S]) Reject(ctx context.Context, id, commandID string, reason error) (Outcome, error) {
	if reason == nil {
		return 0, &eventstore.InvalidArgumentError{Index: -1, Field: "rejection reason", Reason: "is nil"}
	}
	for ev, err := range r.e.store.ReadStream(ctx, r.e.t.Stream(id), eventstore.Forward(0)) {
		if err != nil {
			return 0, err
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			return 0, err
		}
		for _, c := range rec.Commands {
			if c.ID == commandID {
				out, err := r.e.process(ctx, id, rejection(ev, c, reason, r.rejectionCode(reason)))
				return Outcome(out), err
			}
		}
	}
	return 0, &eventstore.InvalidArgumentError{Index: -1, Field: "command ID",
		Reason: fmt.Sprintf("%q was not sent by saga %q, instance %q", commandID, r.e.t.name, id)}
}
