package projection

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// instruments are what a consumer traces and measures its batches with,
// resolved from its options once, when it is built: a batch costs a span
// start, a counter add and a histogram record, and nothing more while
// tracing is off.
type instruments struct {
	// tracer starts no span while none can record (Off): a catch-up in
	// batches of one would pay a no-op span's allocations per event.
	tracer      telemetry.Tracer
	processName string
	rebuildName string
	// processStart starts a batch's span: a new root (a batch has many
	// creation contexts, which it links to, and may run under an ambient
	// span), of kind CONSUMER.
	processStart []trace.SpanStartOption
	rebuildStart []trace.SpanStartOption
	handleStart  trace.SpanStartOption
	// spanAttrs are the messaging attributes every batch span carries;
	// group is the consumer's name among them.
	spanAttrs []attribute.KeyValue
	group     attribute.KeyValue

	duration metric.Float64Histogram
	consumed metric.Int64Counter
	// metricAttrs are the attributes of both, and ok and consumedOpts
	// their options made once.
	metricAttrs  []attribute.KeyValue
	ok           []metric.RecordOption
	consumedOpts []metric.AddOption
}

func newInstruments(name string, opts Options) *instruments {
	group := telemetry.MessagingConsumerGroupKey.String(name)
	process := telemetry.MessagingOperationNameKey.String("process")
	in := &instruments{
		tracer:       telemetry.NewTracer(opts.TracerProvider),
		processName:  "process " + name,
		rebuildName:  "rebuild " + name,
		processStart: []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer)},
		rebuildStart: []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal)},
		handleStart:  trace.WithSpanKind(trace.SpanKindConsumer),
		spanAttrs: []attribute.KeyValue{telemetry.MessagingSystem, process,
			telemetry.MessagingOperationTypeKey.String("process"), group},
		group:       group,
		metricAttrs: []attribute.KeyValue{telemetry.MessagingSystem, process, group},
	}
	if dest, ok := destination(opts.Filter); ok {
		in.spanAttrs = append(in.spanAttrs, telemetry.MessagingDestinationKey.String(dest))
	}
	set := attribute.NewSet(in.metricAttrs...)
	in.ok = []metric.RecordOption{metric.WithAttributeSet(set)}
	in.consumedOpts = []metric.AddOption{metric.WithAttributeSet(set)}

	meter := telemetry.Meter(opts.MeterProvider)
	var err error
	in.duration, err = meter.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the handling of a batch of stored events by a consumer, checkpoint included."),
		metric.WithExplicitBucketBoundaries(telemetry.MessagingDurationBuckets...))
	telemetry.Unmade("projection", err)
	in.consumed, err = meter.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Stored events handed to a consumer's handlers."))
	telemetry.Unmade("projection", err)
	return in
}

// destination is the messaging.destination.name of a consumer's spans: the
// one stream prefix (a category, such as "order-") its filter selects, when
// that is all it selects. Other filters (types, several prefixes, none)
// name no destination, as the conventions ask of one that is not a single
// low-cardinality name.
func destination(f eventstore.Filter) (string, bool) {
	if len(f.Types) == 0 && len(f.StreamPrefixes) == 1 && f.StreamPrefixes[0] != "" {
		return f.StreamPrefixes[0], true
	}
	return "", false
}

// batchSpan is the span and measure of one batch handed to the handlers.
type batchSpan struct {
	in   *instruments
	span trace.Span // nil when not traced
	// start is when the batch began, when its duration is measured.
	start time.Time
}

// startBatch starts the `process {consumer}` span of a batch: a new root,
// linked to the contexts its events were appended in and to the span the
// consumer runs under, if any (a rebuild's, or a caller's around CatchUp),
// and counts the batch's events as consumed. The returned context carries
// the span.
func (c *Consumer) startBatch(ctx context.Context, batch []unit) (context.Context, batchSpan) {
	in := c.tel
	b := batchSpan{in: in}
	if in.duration.Enabled(ctx) {
		b.start = time.Now()
	}
	in.consumed.Add(ctx, int64(len(batch)), in.consumedOpts...)
	if in.tracer.Off() {
		return ctx, b
	}
	opts := in.processStart
	if links := linksOf(ctx, batch); len(links) > 0 {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(links...))
	}
	ctx, b.span = in.tracer.Start(ctx, in.processName, opts...)
	if b.span.IsRecording() {
		b.span.SetAttributes(in.spanAttrs...)
		b.span.SetAttributes(telemetry.MessagingBatchCountKey.Int(len(batch)))
	}
	return ctx, b
}

// recording reports whether the batch's span records.
func (b batchSpan) recording() bool { return b.span != nil && b.span.IsRecording() }

// end ends the batch's span and records its duration, with err's type when
// it failed. A batch that stops because ctx ended (the consumer is shutting
// down, or lost its lease) did not fail: it is left unmeasured, and its
// events are handled again.
func (b batchSpan) end(ctx context.Context, err error) {
	measured := !b.start.IsZero()
	switch {
	case err == nil:
		if measured {
			b.in.duration.Record(ctx, time.Since(b.start).Seconds(), b.in.ok...)
		}
	case ctx.Err() != nil:
	default:
		et := telemetry.ErrorTypeKey.String(telemetry.ErrorType(err))
		if measured {
			b.in.duration.Record(ctx, time.Since(b.start).Seconds(),
				metric.WithAttributes(append(b.in.metricAttrs[:len(b.in.metricAttrs):len(b.in.metricAttrs)], et)...))
		}
		if b.span != nil && b.span.IsRecording() {
			b.span.SetAttributes(et)
			b.span.SetStatus(codes.Error, err.Error())
		}
	}
	if b.span != nil {
		b.span.End()
	}
}

// linksOf returns the links of a batch's span: to the span ctx carries,
// when valid, then to the distinct contexts the events record, at most
// [telemetry.MaxLinks] in all. It allocates nothing for a batch whose
// events record no context, outside a span.
func linksOf(ctx context.Context, batch []unit) []trace.Link {
	var links []trace.Link
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	for i := range batch {
		links = telemetry.AddLink(links, batch[i].ev.Metadata)
	}
	return links
}

// startHandle starts the `handle {event type}` span of one stored event,
// a child of the batch span in ctx linked to the context the event was
// appended in, when the batch span records (traced); otherwise it returns
// ctx and a nil span, and costs nothing. The handler runs under the
// returned context, so that its own spans nest under the event's.
func (c *Consumer) startHandle(ctx context.Context, traced bool, e *eventstore.Event) (context.Context, trace.Span) {
	if !traced {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{c.tel.handleStart}
	if l, ok := telemetry.LinkTo(e.Metadata); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	ctx, span := c.tel.tracer.Start(ctx, "handle "+e.Type, opts...)
	span.SetAttributes(
		telemetry.MessagingMessageIDKey.String(e.ID.String()),
		telemetry.StreamKey.String(e.StreamID),
		telemetry.VersionKey.Int64(int64(e.Version)),
		telemetry.PositionKey.String(e.Position.String()),
		telemetry.EventTypeKey.String(e.Type),
	)
	if e.Metadata.CorrelationID != "" {
		span.SetAttributes(telemetry.MessagingConversationIDKey.String(e.Metadata.CorrelationID))
	}
	return ctx, span
}

// endHandle ends a handle span (nil when none was started): with Error
// status when err says the event finally failed (the consumer stops on
// it); an event parked has set that status already.
func endHandle(ctx context.Context, span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && ctx.Err() == nil {
		span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceRetry records, on the span in ctx when it records (an event's
// handle span, or a batch handler's batch span), that attempt failed with
// err and is to be retried.
func traceRetry(ctx context.Context, attempt int, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("retry", trace.WithAttributes(telemetry.AttemptKey.Int(attempt),
		telemetry.ErrorTypeKey.String(telemetry.ErrorType(err))))
}

// traceParked records, on the span in ctx when it records, that a part of
// its event was parked as dead letter d, and marks the span as failed.
func traceParked(ctx context.Context, d eventstore.DeadLetter) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("dead_letter", trace.WithAttributes(
		telemetry.DeadLetterKey.String(d.ID),
		telemetry.PartKey.Int(d.Part),
		telemetry.AttemptKey.Int(d.Attempts)))
	span.SetStatus(codes.Error, d.Error)
}

// startRebuild starts the `rebuild {consumer}` span around a rebuild: a
// new root, whatever span ctx carries, which the rebuild's batch spans
// link to.
func (c *Consumer) startRebuild(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := c.tel.tracer.Start(ctx, c.tel.rebuildName, c.tel.rebuildStart...)
	if span.IsRecording() {
		span.SetAttributes(telemetry.MessagingSystem, c.tel.group)
	}
	return ctx, span
}

// endRebuild ends a rebuild's span with the number of stored events it
// handled and its error, if any.
func endRebuild(ctx context.Context, span trace.Span, done uint64, err error) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.RebuildEventsKey.Int64(int64(done)))
		if err != nil && ctx.Err() == nil {
			span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
