package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// ErrPanicked matches every [*PanicError].
var ErrPanicked = errors.New("projection: panic in user code")

// PanicError reports a panic in user code that a consumer called (a
// handler, a saga runner's batch handler or claim hook, a rebuild's Reset or
// Progress), recovered so that one bad event cannot take the process down
// at every restart, as a bus recovers an aggregate's. A handler's panic is
// a failure like an error: it is retried, then parked (its dead letter's
// Error says it panicked), or returned inside a [*HandlerError] with
// [Stop].
type PanicError struct {
	// Consumer is the consumer's name.
	Consumer string
	// Func names the user code: "handler", "batch handler", "OnClaim",
	// "Reset", "RebuildTx reset" or "Progress".
	Func string
	// Stream, Version and Type locate the event being handled, when there
	// is one (Type as decoded, after upcasting).
	Stream  string
	Version uint64
	Type    string
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error. The stack is left out: dead letters keep the
// error's text, and the stack is logged when the panic is recovered.
func (e *PanicError) Error() string {
	if e.Stream == "" {
		return fmt.Sprintf("consumer %q: %s panicked: %v", e.Consumer, e.Func, e.Value)
	}
	return fmt.Sprintf("consumer %q: %s panicked on event %d of stream %q (type %q): %v",
		e.Consumer, e.Func, e.Version, e.Stream, e.Type, e.Value)
}

// Is makes errors.Is(err, ErrPanicked) true.
func (e *PanicError) Is(target error) bool { return target == ErrPanicked }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// guard calls fn, user code named what, turning a panic into a
// [*PanicError] about ev (if any) that it logs with its stack. Inside a
// transaction, the error rolls it back like any failure, and the store
// never sees the panic.
func (c *Consumer) guard(ctx context.Context, what string, ev *eventstore.Event, fn func() error) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		p := &PanicError{Consumer: c.name, Func: what, Value: v, Stack: debug.Stack()}
		if ev != nil {
			p.Stream, p.Version, p.Type = ev.StreamID, ev.Version, ev.Type
		}
		c.log.ErrorContext(ctx, "projection: user code panicked", slog.String("func", what), slog.String(telemetry.LogStream, p.Stream),
			slog.Uint64(telemetry.LogVersion, p.Version), slog.String(telemetry.LogEventType, p.Type),
			slog.Any("panic", v), slog.String("stack", string(p.Stack)))
		err = p
	}()
	return fn()
}
