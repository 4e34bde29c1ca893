package saga_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// tracedFixture runs the test saga with a bus to Order aggregates (see
// outbox_test.go), a clock the test moves, and the SDK recording what the
// runner traces and measures.
type tracedFixture struct {
	store  eventstore.Store
	reg    *codec.Registry
	sale   *saga.Type[Sale]
	bus    *command.Bus
	clock  *sagatest.Clock
	rec    *oteltest.Recorder
	runner *saga.Runner[Sale]
	log    *bytes.Buffer
}

func newTracedFixture(t *testing.T) *tracedFixture {
	return newTracedFixtureOn(t, memory.New())
}

// newTracedFixtureOn is newTracedFixture on store, which it closes.
func newTracedFixtureOn(t *testing.T, store eventstore.Store) *tracedFixture {
	f := &tracedFixture{store: store, clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)),
		rec: oteltest.New(t), log: &bytes.Buffer{}}
	t.Cleanup(func() { _ = f.store.Close() })
	f.reg = testRegistry(t)
	f.sale = saleType(t, f.reg)
	require.NoError(t, saga.OnRejected(f.sale, func(_ context.Context, s *Sale, _ MakeReservation, reason error, out *saga.Output) error {
		s.Seen = append(s.Seen, "rejected: "+reason.Error())
		out.Complete()
		return nil
	}))
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	f.bus = command.New(f.store, f.reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](f.bus, orders))
	require.NoError(t, command.Route[MakePayment](f.bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](f.bus, orders))
	f.runner = f.newRunner(t)
	return f
}

// newRunner returns another runner of the fixture's saga on its store:
// another process, as far as the saga can tell.
func (f *tracedFixture) newRunner(t *testing.T) *saga.Runner[Sale] {
	r, err := saga.NewRunner(f.sale, f.store, f.bus, saga.RunnerOptions{Clock: f.clock,
		Logger:         slog.New(slog.NewJSONHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Retry:          retry.Policy{Attempts: 3, Initial: time.Microsecond, Max: time.Microsecond},
		TracerProvider: f.rec.TracerProvider, MeterProvider: f.rec.MeterProvider, MaxBatchDelay: time.Millisecond})
	require.NoError(t, err)
	return r
}

// appendTraced stores ev in stream as an appender traced by span would:
// its metadata records the span's context.
func (f *tracedFixture) appendTraced(t *testing.T, span trace.Span, stream string, ev any) eventstore.Event {
	t.Helper()
	data, err := f.reg.Encode(ev)
	require.NoError(t, err)
	ctx := trace.ContextWithSpan(context.Background(), span)
	telemetry.Inject(ctx, &data.Metadata)
	_, err = f.store.Append(trusted.Writer(ctx), stream, eventstore.Any, data)
	require.NoError(t, err)
	return f.last(t, stream)
}

// last returns the last event of stream.
func (f *tracedFixture) last(t *testing.T, stream string) eventstore.Event {
	t.Helper()
	for ev, err := range f.store.ReadStream(context.Background(), stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		require.NoError(t, err)
		return ev
	}
	t.Fatalf("%s is empty", stream)
	return eventstore.Event{}
}

func attr(t *testing.T, s sdktrace.ReadOnlySpan, key string) string {
	t.Helper()
	v, ok := oteltest.Attr(s, attribute.Key(key))
	if !ok {
		return ""
	}
	return v.String()
}

func linkedTo(s sdktrace.ReadOnlySpan) []trace.SpanID {
	var out []trace.SpanID
	for _, l := range s.Links() {
		out = append(out, l.SpanContext.SpanID())
	}
	return out
}

// TestAStoredEventsStepIsAChildLinkedToItsEventAndItsRecordKeepsTheAppend:
// the step of a stored event is a child of the span the caller handles it
// in, linked to the context the event recorded; the step record's append
// is the step's child, and the record's metadata holds the append's
// context. A redelivery is a step too, with outcome duplicate, linked to
// the same stored context.
func TestAStoredEventsStepIsAChildLinkedToItsEventAndItsRecordKeepsTheAppend(t *testing.T) {
	f := newTracedFixture(t)
	tracer := f.rec.TracerProvider.Tracer("test")
	_, origin := tracer.Start(context.Background(), "place order")
	ev := f.appendTraced(t, origin, "order-1", OrderPlaced{OrderID: "1"})
	origin.End()

	batch, batchSpan := tracer.Start(context.Background(), "process saga:sale")
	out, err := f.runner.HandleStored(batch, ev)
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out)
	out, err = f.runner.HandleStored(batch, ev)
	require.NoError(t, err)
	assert.Equal(t, saga.Duplicate, out)
	batchSpan.End()

	steps := f.rec.Named("step sale")
	require.Len(t, steps, 2)
	for i, step := range steps {
		assert.Equal(t, trace.SpanKindInternal, step.SpanKind())
		assert.Equal(t, batchSpan.SpanContext().SpanID(), step.Parent().SpanID(), "step %d is a child of the batch", i)
		assert.Equal(t, []trace.SpanID{origin.SpanContext().SpanID()}, linkedTo(step), "step %d links to the event's context", i)
		assert.Equal(t, "sale", attr(t, step, "cairn.saga.type"))
		assert.Equal(t, "1", attr(t, step, "cairn.saga.instance"))
		assert.Equal(t, "order-1", attr(t, step, "cairn.saga.source"))
		assert.Equal(t, "0", attr(t, step, "cairn.saga.sequence"))
	}
	assert.Equal(t, "handled", attr(t, steps[0], "cairn.outcome"))
	assert.Equal(t, "duplicate", attr(t, steps[1], "cairn.outcome"))

	appends := f.rec.Named("append saga:sale")
	require.Len(t, appends, 1, "a duplicate appends nothing")
	assert.Equal(t, trace.SpanKindClient, appends[0].SpanKind())
	assert.Equal(t, steps[0].SpanContext().SpanID(), appends[0].Parent().SpanID())
	assert.Equal(t, "saga:sale", attr(t, appends[0], "db.collection.name"))
	assert.Equal(t, "saga:sale-1", attr(t, appends[0], "cairn.stream"))
	record := f.last(t, "saga:sale-1")
	assert.Equal(t, appends[0].SpanContext().SpanID(), telemetry.SpanContextOf(record.Metadata).SpanID(), "the record keeps its append's context")
	assert.Equal(t, batchSpan.SpanContext().TraceID(), telemetry.SpanContextOf(record.Metadata).TraceID())

	handled, _ := f.rec.Int64(t, "cairn.saga.steps", telemetry.SagaTypeKey.String("sale"), telemetry.OutcomeKey.String("handled"))
	dups, _ := f.rec.Int64(t, "cairn.saga.steps", telemetry.SagaTypeKey.String("sale"), telemetry.OutcomeKey.String("duplicate"))
	assert.EqualValues(t, 1, handled)
	assert.EqualValues(t, 1, dups)
	assert.EqualValues(t, 1, f.rec.Count(t, "db.client.operation.duration", telemetry.DBCollectionNameKey.String("saga:sale")))
	assert.Empty(t, oteltest.Orphans(f.rec.Ended()))
}

// TestADeliveryIsARootStepWhenItsCallerTracesNothing: a delivery has no
// stored context to link to; without a span of the caller's its step
// starts a trace, and its outcomes (held, then handled with what it
// released) are each a step.
func TestADeliveryIsARootStepWhenItsCallerTracesNothing(t *testing.T) {
	f := newTracedFixture(t)
	ctx := context.Background()
	out, err := f.runner.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: 1, Event: Note{OrderID: "1", Text: "early"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Held, out)
	out, err = f.runner.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: 0, Event: Note{OrderID: "1", Text: "first"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out)

	steps := f.rec.Named("step sale")
	require.Len(t, steps, 3, "the early one, the first one, and the early one released")
	outcomes := []string{}
	for _, s := range steps {
		outcomes = append(outcomes, attr(t, s, "cairn.outcome"))
		assert.Empty(t, s.Links(), "a delivery has no stored context")
	}
	// The released message's step ends before the step that released it:
	// it is its sibling, not its child, and both start traces.
	assert.ElementsMatch(t, []string{"held", "handled", "handled"}, outcomes)
	assert.False(t, steps[0].Parent().IsValid())
	assert.False(t, steps[1].Parent().IsValid())
	assert.False(t, steps[2].Parent().IsValid())
	held, _ := f.rec.Int64(t, "cairn.saga.steps", telemetry.OutcomeKey.String("held"))
	assert.EqualValues(t, 1, held)
}

// TestAParkedStepSaysWhyAndItsLogNamesTheTrace: a step whose handler fails
// records each retry as a span event, ends in Error with outcome parked,
// and the runner's warning names the step's trace.
func TestAParkedStepSaysWhyAndItsLogNamesTheTrace(t *testing.T) {
	f := newTracedFixture(t)
	_, err := f.runner.Deliver(context.Background(), saga.Delivery{Source: "notes", Event: Note{OrderID: "1", Text: "start"}})
	require.NoError(t, err)
	out, err := f.runner.Deliver(context.Background(), saga.Delivery{Source: "flaky-1", Event: Flaky{OrderID: "1", Times: 100}})
	require.NoError(t, err)
	require.Equal(t, saga.Parked, out)
	steps := f.rec.Named("step sale")
	require.Len(t, steps, 2)
	step := steps[1]
	assert.Equal(t, "parked", attr(t, step, "cairn.outcome"))
	assert.Equal(t, codes.Error, step.Status().Code)
	assert.Contains(t, step.Status().Description, "flaky 1 of 100")
	var retries int
	for _, e := range step.Events() {
		if e.Name == "retry" {
			retries++
		}
	}
	assert.Equal(t, 2, retries, "three attempts: two retries: %v", step.Events())
	var logged bool
	for line := range strings.SplitSeq(f.log.String(), "\n") {
		if strings.Contains(line, "message parked") {
			logged = true
			assert.Contains(t, line, `"trace_id":"`+step.SpanContext().TraceID().String()+`"`)
			assert.Contains(t, line, `"span_id":"`+step.SpanContext().SpanID().String()+`"`)
			assert.Contains(t, line, `"saga":"sale"`)
			assert.Contains(t, line, `"instance":"1"`)
		}
	}
	assert.True(t, logged, "the parked message is logged")
}

// TestTheOutboxSendsUnderASpanLinkedToTheRecordThatHoldsTheCommand: each
// command the outbox sends is a PRODUCER span, a child of the span the
// outbox works in, linked to the context its step record keeps; the
// bus's work runs inside it, so whatever the command's events record of
// a trace is the send's. A rejection is an outcome, and the step that
// takes it back is the send's child.
func TestTheOutboxSendsUnderASpanLinkedToTheRecordThatHoldsTheCommand(t *testing.T) {
	f := newTracedFixture(t)
	tracer := f.rec.TracerProvider.Tracer("test")
	ctx := context.Background()
	for _, id := range []string{"1", "soldout-2"} {
		_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: id}})
		require.NoError(t, err)
	}
	records := map[string]eventstore.Event{"1": f.last(t, "saga:sale-1"), "soldout-2": f.last(t, "saga:sale-soldout-2")}

	batch, batchSpan := tracer.Start(ctx, "process saga:sale:outbox")
	for _, id := range []string{"1", "soldout-2"} {
		require.NoError(t, f.runner.SendStored(batch, records[id]))
	}
	batchSpan.End()

	sends := f.rec.Named("send make.reservation")
	require.Len(t, sends, 2)
	byOutcome := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sends {
		byOutcome[attr(t, s, "cairn.outcome")] = s
		assert.Equal(t, trace.SpanKindProducer, s.SpanKind())
		assert.Equal(t, batchSpan.SpanContext().SpanID(), s.Parent().SpanID())
		assert.Equal(t, "send", attr(t, s, "messaging.operation.name"))
		assert.Equal(t, "send", attr(t, s, "messaging.operation.type"))
		assert.Equal(t, "make.reservation", attr(t, s, "messaging.destination.name"))
		assert.Equal(t, "cairn", attr(t, s, "messaging.system"))
		assert.NotEmpty(t, attr(t, s, "cairn.command_id"))
	}
	sent, rejected := byOutcome["sent"], byOutcome["rejected"]
	require.NotNil(t, sent)
	require.NotNil(t, rejected)
	assert.Equal(t, "1", attr(t, sent, "cairn.saga.instance"))
	assert.Equal(t, []trace.SpanID{telemetry.SpanContextOf(records["1"].Metadata).SpanID()}, linkedTo(sent),
		"the send links to the record that holds the command")
	assert.Equal(t, []trace.SpanID{telemetry.SpanContextOf(records["soldout-2"].Metadata).SpanID()}, linkedTo(rejected))
	assert.NotEqual(t, codes.Error, rejected.Status().Code, "a rejection is an answer, not a failure")

	// Whatever the bus records of a trace in the command's events is the
	// send's: the dispatch runs in its context.
	reserved := f.last(t, "order-1")
	if sc := telemetry.SpanContextOf(reserved.Metadata); sc.IsValid() {
		assert.Equal(t, sent.SpanContext().TraceID(), sc.TraceID())
	}
	for _, d := range f.rec.Named("dispatch make.reservation") {
		assert.Equal(t, batchSpan.SpanContext().TraceID(), d.SpanContext().TraceID())
	}

	var back sdktrace.ReadOnlySpan
	for _, s := range f.rec.Named("step sale") {
		if s.Parent().SpanID() == rejected.SpanContext().SpanID() {
			back = s
		}
	}
	require.NotNil(t, back, "the rejection's step is the send's child")
	assert.Equal(t, "handled", attr(t, back, "cairn.outcome"))
	assert.Equal(t, attr(t, rejected, "cairn.command_id"), attr(t, back, "cairn.command_id"))

	dest := telemetry.MessagingDestinationKey.String("make.reservation")
	n, _ := f.rec.Int64(t, "messaging.client.sent.messages", dest)
	assert.EqualValues(t, 2, n)
	assert.EqualValues(t, 2, f.rec.Count(t, "messaging.client.operation.duration", dest))
}

// TestAFailedSendIsAnErrorWithItsType: a command its bus cannot carry out
// ends its send in Error, counted with its error.type.
func TestAFailedSendIsAnErrorWithItsType(t *testing.T) {
	f := newTracedFixture(t)
	ctx := context.Background()
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	record := f.last(t, "saga:sale-1")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, f.runner.SendStored(cancelled, record))
	sends := f.rec.Named("send make.reservation")
	require.Len(t, sends, 1)
	assert.Equal(t, "failed", attr(t, sends[0], "cairn.outcome"))
	assert.Equal(t, codes.Error, sends[0].Status().Code)
	typ := attr(t, sends[0], "error.type")
	assert.NotEmpty(t, typ)
	n, _ := f.rec.Int64(t, "messaging.client.sent.messages", telemetry.ErrorTypeKey.String(typ))
	assert.EqualValues(t, 1, n)
}

// TestAFiredDeadlineStartsATraceLinkedToTheStepThatScheduledIt: firing is
// caused by time, not by a message, so it is a new trace; it links to the
// append of the record that scheduled the deadline, which a runner that
// never saw that step (another process, after a restart) still knows,
// and the fire's step is its child.
func TestAFiredDeadlineStartsATraceLinkedToTheStepThatScheduledIt(t *testing.T) {
	f := newTracedFixture(t)
	tracer := f.rec.TracerProvider.Tracer("test")
	ctx, span := tracer.Start(context.Background(), "consume")
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	span.End()
	scheduled := telemetry.SpanContextOf(f.last(t, "saga:sale-1").Metadata)
	require.True(t, scheduled.IsValid())

	restarted := f.newRunner(t)
	f.clock.Advance(16 * time.Minute)
	fired, err := restarted.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, fired)

	deadlines := f.rec.Named("deadline sale")
	require.Len(t, deadlines, 1)
	d := deadlines[0]
	assert.False(t, d.Parent().IsValid(), "a new trace")
	assert.NotEqual(t, span.SpanContext().TraceID(), d.SpanContext().TraceID())
	assert.Equal(t, []trace.SpanID{scheduled.SpanID()}, linkedTo(d), "linked to the record that scheduled it")
	assert.Equal(t, scheduled.TraceID(), d.Links()[0].SpanContext.TraceID())
	assert.Equal(t, "payment", attr(t, d, "cairn.deadline.name"))
	assert.Equal(t, "1", attr(t, d, "cairn.saga.instance"))

	var step sdktrace.ReadOnlySpan
	for _, s := range f.rec.Named("step sale") {
		if s.Parent().SpanID() == d.SpanContext().SpanID() {
			step = s
		}
	}
	require.NotNil(t, step, "the fire's step is the deadline's child")
	assert.Equal(t, "handled", attr(t, step, "cairn.outcome"))
	assert.Equal(t, telemetry.SpanContextOf(f.last(t, "saga:sale-1").Metadata).TraceID(), d.SpanContext().TraceID(),
		"the fire's record is in the deadline's trace")
}
