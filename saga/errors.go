package saga

import (
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
)

var (
	// ErrInvalidSetup matches every [*SetupError].
	ErrInvalidSetup = errors.New("saga: invalid set-up")
	// ErrHandlerFailed matches every [*HandlerError].
	ErrHandlerFailed = errors.New("saga: handler failed")
	// ErrNotParked is returned by [Runner.Retry] and [Runner.Skip] for an
	// instance that has no parked message.
	ErrNotParked = errors.New("saga: the instance has no parked message")
	// ErrStale matches every [*StaleError]: an operator's action on an
	// instance that is no longer as the operator saw it.
	ErrStale = errors.New("saga: the instance changed since it was looked at")
	// ErrRecordTooLarge matches every [*RecordSizeError].
	ErrRecordTooLarge = errors.New("saga: step record too large")
)

// StaleError reports an operator's action (Retry, Skip, Release) that
// names a message, or a gap, that the instance no longer has as the
// operator saw it: another operator acted first, or the instance moved
// on. Nothing was changed; look at the instance again (see
// [Runner.Explain]).
type StaleError struct {
	Saga, Instance string
	// Action is "retry", "skip" or "release".
	Action string
	// Want is what the action named (a message ID, or a gap), and Now what
	// the instance has instead ("" for nothing).
	Want, Now string
}

// Error implements error.
func (e *StaleError) Error() string {
	now := e.Now
	if now == "" {
		now = "nothing"
	}
	return fmt.Sprintf("saga %q, instance %q: %s of %s refused: the instance has %s there now", e.Saga, e.Instance, e.Action, e.Want, now)
}

// Is makes errors.Is(err, ErrStale) true, and errors.Is(err,
// ErrNotParked) when the instance has nothing parked.
func (e *StaleError) Is(target error) bool {
	return target == ErrStale || (target == ErrNotParked && e.Now == "" && e.Action != "release")
}

// RecordSizeError reports a step whose record would be larger than
// [MaxStepSize]: a state that grew too large, too many commands in one
// step, or too many early deliveries held at once. A handled step that
// does not fit parks its message; an early delivery that does not fit is
// refused.
type RecordSizeError struct {
	Saga, Instance, Stream string
	// Message is the message the step was for.
	Message string
	// Size is the record's size in bytes, and Limit [MaxStepSize].
	Size, Limit int
	// Parts are the largest parts of the record and their sizes, for the
	// operator to see what grew.
	Parts string
}

// Error implements error.
func (e *RecordSizeError) Error() string {
	return fmt.Sprintf("saga %q, instance %q (stream %q): the step record of %s would be %d bytes, more than the limit of %d (%s)",
		e.Saga, e.Instance, e.Stream, e.Message, e.Size, e.Limit, e.Parts)
}

// Is makes errors.Is(err, ErrRecordTooLarge) true.
func (e *RecordSizeError) Is(target error) bool { return target == ErrRecordTooLarge }

// SetupError reports a saga declared or run in a way that cannot work: a
// type mapped twice, a command no bus routes, a type the codec does not
// know. It is returned when the saga is set up, not when it first runs.
type SetupError struct {
	// Saga is the saga type's name.
	Saga string
	// Reason says what is wrong.
	Reason string
	// Err is an underlying error, if any.
	Err error
}

// Error implements error.
func (e *SetupError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("saga %q: %s: %v", e.Saga, e.Reason, e.Err)
	}
	return fmt.Sprintf("saga %q: %s", e.Saga, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidSetup) true.
func (e *SetupError) Is(target error) bool { return target == ErrInvalidSetup }

// Unwrap returns Err.
func (e *SetupError) Unwrap() error { return e.Err }

// HandlerError reports a message that an instance's handler failed on
// (returned an error or panicked), or that could not be routed to an
// instance. It names the saga, the instance, and the message.
type HandlerError struct {
	Saga     string
	Instance string
	// Message describes the message: its kind, source, sequence and type.
	Message string
	// Attempts counts the failed runs.
	Attempts int
	Err      error
}

// Error implements error.
func (e *HandlerError) Error() string {
	inst := e.Instance
	if inst == "" {
		inst = "(none)"
	}
	return fmt.Sprintf("saga %q, instance %q: %s failed after %d attempts: %v", e.Saga, inst, e.Message, e.Attempts, e.Err)
}

// Is makes errors.Is(err, ErrHandlerFailed) true.
func (e *HandlerError) Is(target error) bool { return target == ErrHandlerFailed }

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }

// corrupt reports a step record that cannot be read back.
func corrupt(stream string, version uint64, what string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: saga stream %q, version %d: %s: %w", eventstore.ErrCorrupt, stream, version, what, err)
	}
	return fmt.Errorf("%w: saga stream %q, version %d: %s", eventstore.ErrCorrupt, stream, version, what)
}
