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
)

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
