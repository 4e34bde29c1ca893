package command

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-es/cairn/internal/telemetry"
)

// Handler dispatches a command: the [Bus] at the core, wrapped by
// middleware.
type Handler interface {
	Dispatch(ctx context.Context, msg *Message) (Result, error)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, msg *Message) (Result, error)

// Dispatch calls f.
func (f HandlerFunc) Dispatch(ctx context.Context, msg *Message) (Result, error) { return f(ctx, msg) }

// Middleware wraps a [Handler], as net/http middleware wraps an
// http.Handler: it may inspect or change the message, refuse it, or observe
// the result.
type Middleware func(next Handler) Handler

// Validator is implemented by commands that can check themselves before
// they reach their aggregate.
type Validator interface {
	Validate() error
}

// ValidationError reports a command refused by its own Validate method.
type ValidationError struct {
	// CommandType is the command's Go type, as %T prints it.
	CommandType string
	// CommandID is the ID of the refused command.
	CommandID string
	// Err is what Validate returned.
	Err error
}

// Error implements error.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("command: invalid %s (ID %s): %v", e.CommandType, e.CommandID, e.Err)
}

// Unwrap returns Err, so the command's own sentinel matches.
func (e *ValidationError) Unwrap() error { return e.Err }

// Validating refuses commands whose Validate method (see [Validator])
// fails, with a [*ValidationError], before any aggregate is loaded.
func Validating() Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) (Result, error) {
			if v, ok := msg.Command.(Validator); ok {
				if err := v.Validate(); err != nil {
					return Result{CommandID: msg.ID}, &ValidationError{CommandType: fmt.Sprintf("%T", msg.Command), CommandID: msg.ID, Err: err}
				}
			}
			return next.Dispatch(ctx, msg)
		})
	}
}

// Logging logs every dispatch to logger (nil means slog.Default()): at
// Debug when it succeeds, Info for a duplicate, Warn when it fails. Its
// records name the dispatch's trace (trace_id, span_id) while tracing is
// on: middleware runs inside the dispatch span.
func Logging(logger *slog.Logger) Middleware {
	logger = telemetry.Logger(logger)
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) (Result, error) {
			start := time.Now()
			res, err := next.Dispatch(ctx, msg)
			attrs := []slog.Attr{
				slog.String(telemetry.LogCommandType, fmt.Sprintf("%T", msg.Command)),
				slog.String(telemetry.LogCommandID, msg.ID),
				slog.String(telemetry.LogStream, res.Stream),
				slog.Int("events", len(res.Events)),
				slog.Int("attempts", res.Attempts),
				slog.Duration("duration", time.Since(start)),
			}
			level := slog.LevelDebug
			switch {
			case err != nil:
				level = slog.LevelWarn
				attrs = append(attrs, slog.Any(telemetry.LogError, err))
			case res.Duplicate:
				level = slog.LevelInfo
				attrs = append(attrs, slog.Bool("duplicate", true))
			}
			logger.LogAttrs(ctx, level, "command dispatched", attrs...)
			return res, err
		})
	}
}

// Observation is what [Observing] reports about one dispatch, for metrics.
type Observation struct {
	Message  *Message
	Result   Result
	Err      error
	Duration time.Duration
}

// Observing calls observe after every dispatch, for metrics: count commands,
// duplicates, conflicts (Result.Attempts > 1) and errors, time them. It
// must be quick and safe for concurrent use.
func Observing(observe func(context.Context, Observation)) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) (Result, error) {
			start := time.Now()
			res, err := next.Dispatch(ctx, msg)
			observe(ctx, Observation{Message: msg, Result: res, Err: err, Duration: time.Since(start)})
			return res, err
		})
	}
}
