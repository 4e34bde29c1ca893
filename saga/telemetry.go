package saga

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// sagaTelemetry is what a runner traces and measures with, resolved and
// made once when the runner is made: its tracer, its instruments, and the
// span names and attribute sets that do not change from one message to
// the next. A nil *sagaTelemetry (an engine that replays history) traces
// and measures nothing.
//
// Spans follow the cost rule of internal/telemetry: none is started while
// no span can record (telemetry.Tracer.Off: a no-op provider, or the
// global one before a service installs an SDK), and attributes, links and
// events are added only while one records.
type sagaTelemetry struct {
	tracer  telemetry.Tracer
	meter   metric.Meter
	appends *telemetry.Appends
	// category is the step records' db.collection.name, "saga:<type>".
	category string
	// stepName and deadlineName are the span names, made once, and
	// stepStart, sendStart and deadlineStart the spans' options.
	stepName, deadlineName string
	stepStart, sendStart   []trace.SpanStartOption
	sagaType               attribute.KeyValue

	steps       metric.Int64Counter
	stepOptions [parkedOut + 1][]metric.AddOption // by outcome

	sent     metric.Int64Counter
	sendTime metric.Float64Histogram
	// sends holds the names of the command types the saga declares, made
	// once and only read after; others (a type a record holds under an
	// older name) are made on their first send and kept in more.
	sends map[string]*sendNames
	more  sync.Map // command type -> *sendNames

	gauges gaugeInstruments
}

// sendNames are the span name and the metrics' options of the sends of
// one command type, made once.
type sendNames struct {
	span string
	add  []metric.AddOption
	rec  []metric.RecordOption
	// failed are the attributes of a failed send, less its error.type.
	failed []attribute.KeyValue
}

// newSagaTelemetry resolves the tracer and meter of opts and makes the
// runner's instruments. An instrument the SDK refuses is reported through
// otel.Handle and replaced by a no-op: telemetry never stops a saga.
func newSagaTelemetry(name string, commandTypes []string, store eventstore.Store, opts RunnerOptions) *sagaTelemetry {
	tracer, meter := telemetry.NewTracer(opts.TracerProvider), telemetry.Meter(opts.MeterProvider)
	t := &sagaTelemetry{tracer: tracer, meter: meter, appends: telemetry.NewAppends(tracer, meter, store),
		category: "saga:" + name, stepName: "step " + name, deadlineName: "deadline " + name,
		stepStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
		sendStart: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)},
		sagaType:  telemetry.SagaTypeKey.String(name), sends: make(map[string]*sendNames, len(commandTypes))}
	for _, c := range commandTypes {
		t.sends[c] = newSendNames(c)
	}
	var err error
	t.steps, err = meter.Int64Counter("cairn.saga.steps", metric.WithUnit("{message}"),
		metric.WithDescription("Messages a saga's instances took, by what became of them."))
	telemetry.Unmade("saga", err)
	for o := handled; o <= parkedOut; o++ {
		t.stepOptions[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(t.sagaType,
			telemetry.OutcomeKey.String(Outcome(o).String())))}
	}
	t.sent, err = meter.Int64Counter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Commands a saga's outbox sent."))
	telemetry.Unmade("saga", err)
	t.sendTime, err = meter.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a saga's outbox sends."),
		metric.WithExplicitBucketBoundaries(telemetry.MessagingDurationBuckets...))
	telemetry.Unmade("saga", err)
	t.gauges = newGaugeInstruments(meter, t.sagaType)
	return t
}

// counted counts one message that reached an outcome.
func (t *sagaTelemetry) counted(ctx context.Context, o outcome) {
	if t == nil || o < handled || o > parkedOut {
		return
	}
	t.steps.Add(ctx, 1, t.stepOptions[o]...)
}

// noSpan stands in for a span not started: it records nothing, and ending
// it does nothing.
var noSpan = trace.SpanFromContext(context.Background())

// stepSpan is a `step {saga type}` span in progress.
type stepSpan struct {
	t    *sagaTelemetry
	span trace.Span
	// linked says the span was started linked to its message's context.
	linked bool
}

// startStep starts the step of msg for instance id: a child of the span in
// ctx (a consumer's batch span, a caller's span, a send, a deadline).
func (t *sagaTelemetry) startStep(ctx context.Context, id string, msg *message) (context.Context, stepSpan) {
	if t == nil {
		return ctx, stepSpan{}
	}
	if t.tracer.Off() {
		return ctx, stepSpan{t: t, span: noSpan}
	}
	// The link goes in at the start, where a sampler sees it and a span
	// cut short (a process killed mid-step) still has it, when the message
	// is in hand; one a record names by reference is read during the step
	// and linked at its end.
	opts, linked := t.stepStart, false
	if msg.event != nil {
		if l, ok := telemetry.LinkTo(msg.event.Metadata); ok {
			opts, linked = append(opts[:len(opts):len(opts)], trace.WithLinks(l)), true
		}
	}
	// So do the attributes, for the same reasons.
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, t.sagaType, telemetry.SagaInstanceKey.String(id))
	switch msg.kind() {
	case kindEvent:
		if msg.in.Source != "" {
			attrs = append(attrs, telemetry.SagaSourceKey.String(msg.in.Source), telemetry.SagaSequenceKey.Int64(int64(msg.in.Sequence)))
		}
	case kindRejected, kindCommand:
		attrs = append(attrs, telemetry.CommandIDKey.String(msg.in.Command))
	}
	ctx, span := t.tracer.Start(ctx, t.stepName, append(opts[:len(opts):len(opts)], trace.WithAttributes(attrs...))...)
	return ctx, stepSpan{t: t, span: span, linked: linked}
}

// retry records a failed attempt of the step's handler, which runs again.
func (s stepSpan) retry(attempt int, herr error) {
	if s.span == nil || !s.span.IsRecording() {
		return
	}
	s.span.AddEvent("retry", trace.WithAttributes(telemetry.AttemptKey.Int(attempt), telemetry.ErrorTypeKey.String(telemetry.ErrorType(herr))))
}

// parked records the failure the step's message is parked with.
func (s stepSpan) parked(herr error) {
	if s.span == nil || !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(herr)))
	s.span.SetStatus(codes.Error, herr.Error())
}

// end ends the step with what became of msg: the outcome, counted, or the
// store's error. The link to the message's stored context is added now,
// as a message that a record names by reference (a parked event retried,
// an event waiting in its stream) is read during the step.
func (s stepSpan) end(ctx context.Context, msg *message, o outcome, err error) {
	if s.t == nil {
		return
	}
	if err == nil {
		s.t.counted(ctx, o)
	}
	if s.span.IsRecording() {
		if msg.event != nil && !s.linked {
			if l, ok := telemetry.LinkTo(msg.event.Metadata); ok {
				s.span.AddLink(l)
			}
		}
		if err != nil {
			s.span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
			s.span.SetStatus(codes.Error, err.Error())
		} else {
			s.span.SetAttributes(telemetry.OutcomeKey.String(Outcome(o).String()))
		}
	}
	s.span.End()
}

// startAppend starts the append of one step record to stream. A child
// append (a step's, or an operator's inside a span of the caller's) is
// traced when the span in ctx records; an operator's call with no span
// around it is traced on its own.
func (t *sagaTelemetry) startAppend(ctx context.Context, stream string, child bool) (context.Context, telemetry.Append, bool) {
	if t == nil {
		return ctx, telemetry.Append{}, false
	}
	ctx, op := t.appends.Start(ctx, t.category, stream, 1, child)
	return ctx, op, true
}

// sendOutcome is what became of one command the outbox sent.
type sendOutcome int

const (
	sendSent sendOutcome = iota
	sendRejected
	sendFailed
	sendDuplicate
)

var sendOutcomes = [...]string{sendSent: "sent", sendRejected: "rejected", sendFailed: "failed", sendDuplicate: "duplicate"}

// sendSpan is a `send {command type}` span in progress.
type sendSpan struct {
	t     *sagaTelemetry
	span  trace.Span
	names *sendNames
	start time.Time
}

func newSendNames(commandType string) *sendNames {
	attrs := []attribute.KeyValue{telemetry.MessagingSystem, telemetry.MessagingOperationNameKey.String("send"),
		telemetry.MessagingDestinationKey.String(commandType)}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return &sendNames{span: "send " + commandType, add: []metric.AddOption{set}, rec: []metric.RecordOption{set}, failed: attrs}
}

func (t *sagaTelemetry) namesOf(commandType string) *sendNames {
	if n, ok := t.sends[commandType]; ok {
		return n
	}
	if v, ok := t.more.Load(commandType); ok {
		return v.(*sendNames)
	}
	v, _ := t.more.LoadOrStore(commandType, newSendNames(commandType))
	return v.(*sendNames)
}

// startSend starts the send of command c of instance id, recorded by the
// step record ev: a PRODUCER span, child of the span in ctx (the outbox
// consumer's batch), linked to the context ev records, which is where
// the command was decided (possibly in another process, long before).
func (t *sagaTelemetry) startSend(ctx context.Context, id string, ev eventstore.Event, c sentCommand) (context.Context, sendSpan) {
	if t == nil {
		return ctx, sendSpan{}
	}
	names := t.namesOf(c.Command.Type)
	if t.tracer.Off() {
		return ctx, sendSpan{t: t, span: noSpan, names: names, start: time.Now()}
	}
	// The link to the step that recorded the command goes in at the start,
	// where a sampler sees it and a send cut short still has it.
	opts := t.sendStart
	if l, ok := telemetry.LinkTo(ev.Metadata); ok {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(l))
	}
	ctx, span := t.tracer.Start(ctx, names.span, append(opts[:len(opts):len(opts)], trace.WithAttributes(telemetry.MessagingSystem,
		telemetry.MessagingOperationNameKey.String("send"), telemetry.MessagingOperationTypeKey.String("send"),
		telemetry.MessagingDestinationKey.String(c.Command.Type), telemetry.CommandIDKey.String(c.ID), t.sagaType,
		telemetry.SagaInstanceKey.String(id)))...)
	return ctx, sendSpan{t: t, span: span, names: names, start: time.Now()}
}

// end ends the send with its outcome, and cause: the rejection, or the
// failure.
func (s sendSpan) end(ctx context.Context, o sendOutcome, attempts int, cause error) {
	if s.t == nil {
		return
	}
	elapsed := time.Since(s.start).Seconds()
	if o == sendFailed && cause != nil {
		attrs := append(append(make([]attribute.KeyValue, 0, len(s.names.failed)+1), s.names.failed...),
			telemetry.ErrorTypeKey.String(telemetry.ErrorType(cause)))
		s.t.sent.Add(ctx, 1, metric.WithAttributes(attrs...))
		s.t.sendTime.Record(ctx, elapsed, metric.WithAttributes(attrs...))
	} else {
		s.t.sent.Add(ctx, 1, s.names.add...)
		s.t.sendTime.Record(ctx, elapsed, s.names.rec...)
	}
	if s.span.IsRecording() {
		s.span.SetAttributes(telemetry.OutcomeKey.String(sendOutcomes[o]))
		if attempts > 1 {
			s.span.SetAttributes(telemetry.AttemptKey.Int(attempts))
		}
		if o == sendFailed && cause != nil {
			s.span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(cause)))
			s.span.SetStatus(codes.Error, cause.Error())
		}
	}
	s.span.End()
}

// startDeadline starts the firing of due deadline d: a new root, as no
// message caused it but the passing of time, linked to the step that
// scheduled it when that step's context is known.
func (t *sagaTelemetry) startDeadline(ctx context.Context, d dueEntry) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	if t.tracer.Off() {
		return ctx, noSpan
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal)}
	if d.trace != "" {
		if l, ok := telemetry.LinkTo(eventstore.Metadata{Extra: map[string]string{eventstore.TraceParentKey: d.trace}}); ok {
			opts = append(opts, trace.WithLinks(l))
		}
	}
	ctx, span := t.tracer.Start(ctx, t.deadlineName, opts...)
	if span.IsRecording() {
		span.SetAttributes(t.sagaType, telemetry.SagaInstanceKey.String(d.instance), telemetry.DeadlineNameKey.String(d.name))
	}
	return ctx, span
}

// endDeadline ends a deadline's span with the store's error, if any.
func endDeadline(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && span.IsRecording() {
		span.SetAttributes(telemetry.ErrorTypeKey.String(telemetry.ErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// commandTypes returns the codec names of the command types the saga
// sends (known once its set-up ended): the destinations of its sends.
func (t *Type[S]) commandTypes() []string {
	names := make([]string, 0, len(t.lineage))
	for name := range t.lineage {
		names = append(names, name)
	}
	return names
}
