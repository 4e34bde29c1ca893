package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The keys Cairn's log records use, the same in every package
// (docs/observability.md lists them).
const (
	LogStream      = "stream"
	LogVersion     = "version"
	LogPosition    = "position"
	LogConsumer    = "consumer"
	LogSaga        = "saga"
	LogInstance    = "instance"
	LogCommandID   = "command_id"
	LogCommandType = "command_type"
	LogEventType   = "event_type"
	LogEventID     = "event_id"
	LogError       = "error"
	LogTraceID     = "trace_id"
	LogSpanID      = "span_id"
)

// Logger returns l (slog.Default() when nil) with the trace and span IDs of
// the span in a record's context added to the record: every record Cairn
// logs inside a span names its trace. Records logged without a context, or
// outside a span, are passed on unchanged.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if _, done := l.Handler().(traceHandler); done {
		return l
	}
	return slog.New(traceHandler{l.Handler()})
}

type traceHandler struct{ next slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.next.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.next.WithGroup(name)}
}
