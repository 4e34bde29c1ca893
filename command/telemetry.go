package command

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// outcome is how a dispatch ended, as its span's cairn.outcome and the
// cairn.commands counter name it.
type outcome uint8

const (
	outcomeHandled    outcome = iota // the command's events were appended
	outcomeRejected                  // the aggregate (or the command's Validate) refused it
	outcomeNoop                      // decided, and nothing happened
	outcomeDuplicate                 // the command ID had an outcome already: nothing was appended
	outcomeConflicted                // version conflicts outlasted the attempts
	outcomeFailed                    // anything else: the store, a bad message, no route, a canceled context
	outcomes
)

var outcomeNames = [outcomes]string{"handled", "rejected", "noop", "duplicate", "conflicted", "failed"}

// outcomeOf classifies what Dispatch returns.
func outcomeOf(res Result, err error) outcome {
	switch {
	case res.Duplicate:
		// A redelivery absorbed, whatever the first outcome was (a
		// recorded rejection included): that one was counted when it
		// happened.
		return outcomeDuplicate
	case res.Rejected:
		return outcomeRejected
	case err == nil && len(res.Events) == 0:
		return outcomeNoop
	case err == nil:
		return outcomeHandled
	}
	return errorOutcome(err)
}

// errorOutcome is outcomeOf for a dispatch that returned err, apart so
// that the target errors.As takes is allocated only then. A command
// refused by its own Validate (the Validating middleware) is rejected
// like one its aggregate refuses: a final "no" to the sender, not a
// failure of the service.
func errorOutcome(err error) outcome {
	var invalid *ValidationError
	switch {
	case errors.As(err, &invalid):
		return outcomeRejected
	case errors.Is(err, ErrContention):
		return outcomeConflicted
	}
	return outcomeFailed
}

// Span start options made once: an option boxed at each call would
// allocate on every dispatch.
var (
	internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

// busTelemetry is a bus's tracer and instruments, made once in New.
type busTelemetry struct {
	// tracer starts no dispatch span while no span can record
	// (telemetry.Tracer.Off): starting one on OpenTelemetry's global
	// no-op tracer costs three allocations and some 300 ns, more than
	// the whole budget of tracing that is off (3% of a dispatch).
	tracer   telemetry.Tracer
	commands metric.Int64Counter
	retries  metric.Int64Counter
	duration metric.Float64Histogram
	// types holds the *commandTelemetry of each command Go type the bus
	// does not route, made at its first dispatch (which fails): a routed
	// type's is its route's (Bus.routes).
	types sync.Map
}

func newBusTelemetry(opts Options) *busTelemetry {
	meter := telemetry.Meter(opts.MeterProvider)
	t := &busTelemetry{tracer: telemetry.NewTracer(opts.TracerProvider)}
	var errs [3]error
	t.commands, errs[0] = meter.Int64Counter("cairn.commands", metric.WithUnit("{command}"),
		metric.WithDescription("Commands dispatched, by outcome: handled, rejected, noop, duplicate, conflicted, failed."))
	t.retries, errs[1] = meter.Int64Counter("cairn.command.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Commands decided again after a version conflict."))
	t.duration, errs[2] = meter.Float64Histogram("cairn.command.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of command dispatches, middleware included."),
		metric.WithExplicitBucketBoundaries(telemetry.MessagingDurationBuckets...))
	for _, err := range errs {
		telemetry.Unmade("command bus", err)
	}
	return t
}

// commandTelemetry is what the bus's spans and metrics say of one command
// type: names and attribute sets, made once.
type commandTelemetry struct {
	name                               string // the codec's name, else the Go type
	aggregate                          string // "" when the type has no route
	dispatchName, loadName, decideName string
	attrs                              []attribute.KeyValue // on the dispatch span
	counted                            [outcomes][]metric.AddOption
	timed                              [outcomes][]metric.RecordOption
	retried                            []metric.AddOption
}

func newCommandTelemetry(name, aggregate string) *commandTelemetry {
	typeAttr := telemetry.CommandTypeKey.String(name)
	t := &commandTelemetry{name: name, aggregate: aggregate,
		dispatchName: "dispatch " + name, loadName: "load " + aggregate, decideName: "decide " + name,
		attrs: []attribute.KeyValue{typeAttr}}
	base := []attribute.KeyValue{typeAttr}
	if aggregate != "" {
		base = append(base, telemetry.AggregateKey.String(aggregate))
		t.attrs = append(t.attrs, telemetry.AggregateKey.String(aggregate))
	}
	for o := range outcomes {
		out := telemetry.OutcomeKey.String(outcomeNames[o])
		t.counted[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], out)...))}
		t.timed[o] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(typeAttr, out))}
	}
	t.retried = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(base...))}
	return t
}

// telemetryOf returns the telemetry of cmd's type.
func (b *Bus) telemetryOf(cmd Command) *commandTelemetry {
	ct := reflect.TypeOf(cmd)
	if ct == nil {
		return nilCommand
	}
	if typ, ok := b.routeOf(ct); ok {
		return typ.tel
	}
	if v, ok := b.tel.types.Load(ct); ok {
		return v.(*commandTelemetry)
	}
	v, _ := b.tel.types.LoadOrStore(ct, newCommandTelemetry(typeName(ct, b.nameOf(ct)), ""))
	return v.(*commandTelemetry)
}

var nilCommand = newCommandTelemetry("<nil>", "")

// typeName is how spans and metrics name command type ct: as its events
// do, by the codec's name, else by its Go type.
func typeName(ct reflect.Type, name commandName) string {
	if name.name != "" {
		return name.name
	}
	return ct.String()
}

// dispatchSpanKey holds a recording dispatch span in the context of the
// dispatch, so that its retries are recorded on it even when middleware
// started spans of its own inside it.
type dispatchSpanKey struct{}

// start begins the span of a dispatch of msg: always, as the outermost
// span of the operation, so that a sampler sees every dispatch; except
// while no span can record (see busTelemetry.tracer), when it returns a nil
// span.
func (t *busTelemetry) start(ctx context.Context, ctel *commandTelemetry, commandID string) (context.Context, trace.Span) {
	if t.tracer.Off() {
		return ctx, nil
	}
	// What is known of the command goes in at the start, where a span cut
	// short (its process killed mid-dispatch) still has it: under a span
	// that records (an outbox's send, a traced caller), whose children
	// are sampled with it. A root dispatch that its sampler may drop gets
	// it only once it is known to record, which keeps an unsampled
	// dispatch as cheap as it was.
	attrs := func() []attribute.KeyValue {
		if commandID == "" {
			return ctel.attrs
		}
		return append(ctel.attrs[:len(ctel.attrs):len(ctel.attrs)], telemetry.CommandIDKey.String(commandID))
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		ctx, span := t.tracer.Start(ctx, ctel.dispatchName, internalSpan...)
		if span.IsRecording() {
			span.SetAttributes(attrs()...)
			ctx = context.WithValue(ctx, dispatchSpanKey{}, span)
		}
		return ctx, span
	}
	ctx, span := t.tracer.Start(ctx, ctel.dispatchName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs()...))
	if span.IsRecording() {
		ctx = context.WithValue(ctx, dispatchSpanKey{}, span)
	}
	return ctx, span
}

// end records a dispatch's outcome: on its span, when it records (nil is
// none), and in the metrics.
func (t *busTelemetry) end(ctx context.Context, span trace.Span, ctel *commandTelemetry, msg *Message, res Result, err error, start time.Time) {
	o := outcomeOf(res, err)
	t.commands.Add(ctx, 1, ctel.counted[o]...)
	if !start.IsZero() {
		t.duration.Record(ctx, time.Since(start).Seconds(), ctel.timed[o]...)
	}
	if span == nil {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	correlation := msg.CorrelationID
	if correlation == "" {
		correlation = msg.ID
	}
	span.SetAttributes(ctel.attrs...)
	span.SetAttributes(
		telemetry.CommandIDKey.String(msg.ID),
		telemetry.MessagingConversationIDKey.String(correlation),
		telemetry.OutcomeKey.String(outcomeNames[o]),
		telemetry.AttemptKey.Int(res.Attempts),
	)
	if res.Stream != "" {
		span.SetAttributes(telemetry.StreamKey.String(res.Stream))
	}
	if res.Duplicate {
		span.SetAttributes(telemetry.DuplicateKey.Bool(true))
	}
	if o == outcomeFailed || o == outcomeConflicted {
		span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// retried counts a retry after a version conflict (err), and records it
// on the dispatch span as a "retry" event naming the attempt to come.
func (t *busTelemetry) retried(ctx context.Context, ctel *commandTelemetry, next int, err error) {
	t.retries.Add(ctx, 1, ctel.retried...)
	if span, ok := ctx.Value(dispatchSpanKey{}).(trace.Span); ok {
		span.AddEvent("retry", trace.WithAttributes(telemetry.AttemptKey.Int(next), telemetry.ErrorTypeKey.String(telemetry.ErrorType(err))))
	}
}

// duplicateOf links the dispatch of a command whose ID had an outcome
// before to the context of the append that stored that outcome (origin,
// its first event's metadata), when the dispatch records: a redelivered
// command leads to where it took effect.
func (t *busTelemetry) duplicateOf(ctx context.Context, origin eventstore.Metadata) {
	span, ok := ctx.Value(dispatchSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if l, ok := telemetry.LinkTo(origin); ok {
		span.AddLink(l)
	}
}

// child starts a child span of a dispatch, named name, when the span in
// ctx records; otherwise it returns ctx and nil, and costs nothing. (A
// caller's span that records, from a provider of its own, while the bus's
// is idle, gets no children: the bus's tracer could not record them.)
func (t *busTelemetry) child(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.tracer.Off() || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, name, internalSpan...)
}

// endChild ends a span from child, marking a failure; nil is no span.
func endChild(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
