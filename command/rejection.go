package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/busrepo"
)

// ErrRecordedRejection matches every [*RecordedRejectionError].
var ErrRecordedRejection = errors.New("command: rejection recorded earlier")

// RecordedRejectionError is the answer to a command whose ID was rejected
// before, by a dispatch with Message.RecordRejection set: the rejection is
// the command's final outcome, whatever the aggregate would decide now, and
// nothing was appended. Its Error is the recorded reason, the text of the
// aggregate's error that first rejected it, so that whoever shows
// rejections shows the same text. The error value itself is not stored:
// when the codec registered a code for it (codec.RegisterError), the code
// is, and errors.Is matches the registered error through Unwrap; it always
// matches [ErrRecordedRejection].
type RecordedRejectionError struct {
	// CommandID is the rejected command's ID.
	CommandID string
	// Stream is the aggregate's stream, and Version the version of the
	// recorded rejection in it.
	Stream  string
	Version uint64
	// Command is the Go type of the command that was rejected, as %T
	// printed it.
	Command string
	// Reason is the text of the rejection, as the aggregate's error gave
	// it (valid UTF-8, cut at 64 KiB), and
	// Code the code of its error ("" for none).
	Reason, Code string
	// registered is the error the bus's codec registered under Code.
	registered error
}

// Error returns the recorded reason.
func (e *RecordedRejectionError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrRecordedRejection) true.
func (e *RecordedRejectionError) Is(target error) bool { return target == ErrRecordedRejection }

// Unwrap returns the error the bus's codec registered under Code, so that
// errors.Is matches the aggregate's own sentinel; nil for none.
func (e *RecordedRejectionError) Unwrap() error { return e.registered }

// priorResult is the result of a command whose ID had an outcome before
// this dispatch: its events, or its recorded rejection; or, when that
// outcome was recorded for a command of another type than the one named
// name, a [*CommandIDReusedError].
func (b *Bus) priorResult(ctx context.Context, res Result, prior busrepo.Outcome, name commandName) (Result, error) {
	b.tel.duplicateOf(ctx, eventstore.Metadata{Extra: prior.Origin})
	if !name.is(prior.CommandType) {
		return res, &CommandIDReusedError{CommandID: res.CommandID, Stream: res.Stream, Version: prior.FirstVersion,
			Recorded: prior.CommandType, Command: name.name}
	}
	res.Version, res.Position, res.Events, res.Duplicate = prior.LastVersion, prior.Position, prior.Events, true
	if prior.Rejection == nil {
		return res, nil
	}
	res.Rejected = true
	rej := prior.Rejection
	return res, &RecordedRejectionError{CommandID: res.CommandID, Stream: res.Stream, Version: prior.LastVersion,
		Command: rej.Command, Reason: rej.Reason, Code: rej.Code, registered: b.reg.ErrorOf(rej.Code, rej.Reason).Err}
}

// recordRejection records the aggregate's rejection of msg in inst's
// stream (see [busrepo.Repo.SaveRejection]). Its outcome, when Duplicate,
// is another dispatch's: a rejection or a success.
func (r *typedRoute[T, PT]) recordRejection(ctx context.Context, reg *codec.Registry, inst *aggregate.Instance[T, PT], msg *Message, opts busrepo.SaveOptions, reason error) (busrepo.Outcome, error) {
	rej := busrepo.Rejection{Reason: reason.Error(), Command: fmt.Sprintf("%T", msg.Command), Code: reg.ErrorCode(reason)}
	return r.bus.SaveRejection(ctx, inst, rej, opts)
}
