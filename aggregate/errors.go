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

// PanicError reports a panic in an aggregate's Handle or Apply, recovered
// so that one bad command or event cannot take the process down (a queue
// consumer would otherwise crash on it again at every redelivery).
type PanicError struct {
	// Stream is the aggregate's stream, when it is known.
	Stream string
	// Method is "Handle", "Apply", or the command method that panicked.
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

// TypeError reports an invalid aggregate type or repository set-up.
type TypeError struct {
	// Name is the aggregate type's name.
	Name string
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
