package telemetry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Appends traces and measures the appends of one appender (an aggregate
// repository, a saga runner) to one store: an `append {category}` CLIENT
// span whose context the appended events record, and the
// db.client.operation.duration histogram.
type Appends struct {
	tracer   Tracer
	duration metric.Float64Histogram
	system   attribute.KeyValue
	// ok holds, by category, the histogram's options of a successful
	// append, made once.
	ok sync.Map // string -> []metric.RecordOption
}

// NewAppends returns the Appends of an appender to store.
func NewAppends(tracer Tracer, meter metric.Meter, store any) *Appends {
	duration, err := meter.Float64Histogram("db.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of appends to the event store."),
		metric.WithExplicitBucketBoundaries(DBDurationBuckets...))
	Unmade("append", err)
	return &Appends{tracer: tracer, duration: duration, system: DBSystem(store)}
}

// Append is one append in progress: End it with the append's outcome.
type Append struct {
	a        *Appends
	span     trace.Span // nil for a child append that is not traced
	category string
	start    time.Time
}

// Start begins the append of n events to stream, of category (an
// aggregate type, "saga:<type>"). The returned context carries the span:
// inject it into the events' metadata. A child append (one inside a
// dispatch or a step) is traced only when the span in ctx records, so
// that tracing that is off costs one span per operation, not one per
// piece of it.
func (a *Appends) Start(ctx context.Context, category, stream string, n int, child bool) (context.Context, Append) {
	op := Append{a: a, category: category}
	if a.duration.Enabled(ctx) {
		op.start = time.Now()
	}
	if (child && !trace.SpanFromContext(ctx).IsRecording()) || a.tracer.Off() {
		return ctx, op
	}
	// The attributes go in at the start, where a sampler sees them and a
	// span cut short (its process killed mid-append) still has them.
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, a.system, DBOperationNameKey.String("append"), DBCollectionNameKey.String(category), StreamKey.String(stream))
	if n > 1 {
		attrs = append(attrs, DBBatchSizeKey.Int(n))
	}
	ctx, op.span = a.tracer.Start(ctx, "append "+category, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, op
}

// End records the append's outcome: the first version written, or err.
func (op Append) End(ctx context.Context, first uint64, err error) {
	if !op.start.IsZero() {
		elapsed := time.Since(op.start).Seconds()
		if err != nil {
			op.a.duration.Record(ctx, elapsed, metric.WithAttributes(op.a.system, DBOperationNameKey.String("append"),
				DBCollectionNameKey.String(op.category), ErrorTypeKey.String(ErrorType(err))))
		} else {
			op.a.duration.Record(ctx, elapsed, op.a.okOptions(op.category)...)
		}
	}
	if op.span == nil {
		return
	}
	if !op.span.IsRecording() {
		op.span.End()
		return
	}
	if err != nil {
		op.span.SetAttributes(ErrorTypeKey.String(ErrorType(err)))
		op.span.SetStatus(codes.Error, err.Error())
	} else {
		op.span.SetAttributes(VersionKey.Int64(int64(first)))
	}
	op.span.End()
}

func (a *Appends) okOptions(category string) []metric.RecordOption {
	if v, ok := a.ok.Load(category); ok {
		return v.([]metric.RecordOption)
	}
	opts := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(a.system, DBOperationNameKey.String("append"), DBCollectionNameKey.String(category)))}
	a.ok.Store(category, opts)
	return opts
}

// Inject records the append's span context in md, when the append is
// traced and its span records; otherwise (tracing off, or a child append
// under a span that does not record) it writes nothing, even when the
// caller's context holds a span of another provider's: events record
// where Cairn appended them, or nothing.
func (op Append) Inject(md *eventstore.Metadata) {
	if op.span == nil || !op.span.IsRecording() {
		return
	}
	Inject(trace.ContextWithSpan(context.Background(), op.span), md)
}

// TraceParent is the traceparent of the append's span, as [Inject] would
// record it: "" when it records nothing.
func (op Append) TraceParent() string {
	var md eventstore.Metadata
	op.Inject(&md)
	return md.Extra[eventstore.TraceParentKey]
}

// ErrorType is the error.type of err: the name of its innermost type that
// is not a plain wrapper, low in cardinality as the conventions ask.
func ErrorType(err error) string {
	if t, ok := err.(interface{ ErrorType() string }); ok {
		return t.ErrorType()
	}
	for {
		next := errors.Unwrap(err)
		if next == nil || !isWrapper(err) {
			break
		}
		err = next
	}
	return reflect.TypeOf(err).String()
}

// isWrapper reports whether err only wraps another error with words
// (fmt.Errorf's %w), carrying no type of its own worth naming.
func isWrapper(err error) bool {
	switch reflect.TypeOf(err).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors":
		return true
	}
	return false
}

// Unmade reports an instrument that component could not make, when err is
// not nil: OpenTelemetry's API then hands back a no-op instrument, so the
// component goes on without that metric.
func Unmade(component string, err error) {
	if err != nil {
		otel.Handle(fmt.Errorf("cairn %s telemetry: %w", component, err))
	}
}
