package aggregate

import (
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/internal/clip"
)

var (
	// ErrUnknownEvent is what an aggregate's Apply should wrap when it is
	// given an event it does not know.
	ErrUnknownEvent = errors.New("aggregate: unknown event")
	// ErrApplyFailed matches every [*ApplyError].
	ErrApplyFailed = errors.New("aggregate: event could not be applied")
	// ErrPanicked matches every [*PanicError].
	ErrPanicked = errors.New("aggregate: panic in user code")
	// ErrInvalidType matches every [*TypeError].
	ErrInvalidType = errors.New("aggregate: invalid type")
	// ErrSnapshotNotRegistered: a type asks for snapshots, but its Go type
	// is not registered with the codec, so it cannot be serialized.
	ErrSnapshotNotRegistered = errors.New("aggregate: snapshot type not registered with the codec")
	// ErrDuplicateHandler: an aggregate type was given two handlers for one
	// command type, or two appliers for one event type. A [*TypeError]
	// wraps it.
	ErrDuplicateHandler = errors.New("aggregate: two handlers for one type")
	// ErrNoHandler: an aggregate type has nothing to decide a command with,
	// neither a handler given to [NewType] for its Go type nor the Handle
	// of [Aggregate]. A [*TypeError] wraps it.
	ErrNoHandler = errors.New("aggregate: no handler")
)

// ApplyError reports a stored event that an aggregate could not apply. The
// aggregate was not loaded.
type ApplyError struct {
	// Stream and Version locate the stored event.
	Stream  string
	Version uint64
	// Type and SchemaVersion are the event's, after upcasting.
	Type          string
	SchemaVersion uint32
	// Err is what Apply returned, or a [*PanicError].
	Err error
}

// Error implements error.
func (e *ApplyError) Error() string {
	return fmt.Sprintf("aggregate: apply event %d of stream %q (type %q, schema version %d): %v",
		e.Version, e.Stream, e.Type, e.SchemaVersion, e.Err)
}

// Unwrap returns Err.
func (e *ApplyError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrApplyFailed) true.
func (e *ApplyError) Is(target error) bool { return target == ErrApplyFailed }

// PanicError reports a panic in an aggregate's handler or applier, recovered
// so that one bad command or event cannot take the process down (a queue
// consumer would otherwise crash on it again at every redelivery).
type PanicError struct {
	// Stream is the aggregate's stream, when it is known.
	Stream string
	// Method is "Apply" (a bound applier or the Apply fallback), "Handle"
	// (the Handle fallback), or, for a handler bound by [Handles], the Go
	// type of the command it decides, as %T prints it.
	Method string
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("aggregate: %s of stream %q panicked: %v", e.Method, e.Stream, e.Value)
}

// Is makes errors.Is(err, ErrPanicked) true.
func (e *PanicError) Is(target error) bool { return target == ErrPanicked }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// TypeError reports an invalid aggregate type or repository set-up, or a
// command that its aggregate type has no handler for.
type TypeError struct {
	// Name is the aggregate type's name.
	Name string
	// GoType is the Go type of the command or event the error is about, as
	// %T prints it; empty when it is about the aggregate type as a whole.
	GoType string
	// Reason says what is wrong.
	Reason string
	// Err is a more specific sentinel, if any.
	Err error
}

// Error implements error.
func (e *TypeError) Error() string {
	return fmt.Sprintf("aggregate: type %s: %s", clip.Quote(e.Name), e.Reason)
}

// Is makes errors.Is(err, ErrInvalidType) true.
func (e *TypeError) Is(target error) bool { return target == ErrInvalidType }

// Unwrap returns Err.
func (e *TypeError) Unwrap() error { return e.Err }

// UnknownEventError reports an event that an aggregate type has no applier
// for: one its handler decided, refused before anything is appended, or,
// inside an [*ApplyError], one read from its stream.
type UnknownEventError struct {
	// Aggregate is the aggregate type's name, Stream the instance's stream
	// (empty when no instance is involved).
	Aggregate, Stream string
	// GoType is the event's Go type, as %T prints it.
	GoType string
}

// Error implements error.
func (e *UnknownEventError) Error() string {
	msg := fmt.Sprintf("aggregate: type %s has no applier for event type %s", clip.Quote(e.Aggregate), e.GoType)
	if e.Stream != "" {
		msg += " (stream " + clip.Quote(e.Stream) + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrUnknownEvent) true.
func (e *UnknownEventError) Is(target error) bool { return target == ErrUnknownEvent }
