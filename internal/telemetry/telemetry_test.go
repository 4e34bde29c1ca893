package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestInjectRecordsTheSpanAndKeepsAnEarlierContext(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "append")
	defer span.End()

	var md eventstore.Metadata
	telemetry.Inject(ctx, &md)
	require.Contains(t, md.Extra, eventstore.TraceParentKey)
	sc := telemetry.SpanContextOf(md)
	assert.True(t, sc.IsRemote())
	assert.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	assert.Equal(t, span.SpanContext().SpanID(), sc.SpanID())

	ctx2, other := tp.Tracer("t").Start(context.Background(), "retry")
	defer other.End()
	telemetry.Inject(ctx2, &md)
	assert.Equal(t, span.SpanContext().SpanID(), telemetry.SpanContextOf(md).SpanID(), "the first context stays")
}

func TestInjectWithoutARecordingSpanWritesNothing(t *testing.T) {
	ctx, span := noop.NewTracerProvider().Tracer("t").Start(context.Background(), "append")
	defer span.End()
	var md eventstore.Metadata
	telemetry.Inject(ctx, &md)
	telemetry.Inject(context.Background(), &md)
	assert.Nil(t, md.Extra)
	assert.Zero(t, testing.AllocsPerRun(100, func() { telemetry.Inject(ctx, &md) }))
}

func TestSpanContextOfIgnoresWhatDoesNotParse(t *testing.T) {
	for _, v := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		md := eventstore.Metadata{Extra: map[string]string{eventstore.TraceParentKey: v}}
		assert.False(t, telemetry.SpanContextOf(md).IsValid(), v)
		_, ok := telemetry.LinkTo(md)
		assert.False(t, ok, v)
	}
}

func TestLinksToAreDistinctAndBounded(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	var events []eventstore.Event
	for i := range telemetry.MaxLinks + 10 {
		ctx, span := tp.Tracer("t").Start(context.Background(), "append")
		var md eventstore.Metadata
		telemetry.Inject(ctx, &md)
		span.End()
		events = append(events, eventstore.Event{EventData: eventstore.EventData{Metadata: md}})
		if i == 0 {
			events = append(events, events[0], eventstore.Event{}) // the same context twice, and none
		}
	}
	links := telemetry.LinksTo(events)
	require.Len(t, links, telemetry.MaxLinks)
	assert.Equal(t, telemetry.SpanContextOf(events[0].Metadata).SpanID(), links[0].SpanContext.SpanID())
	assert.NotEqual(t, links[0].SpanContext.SpanID(), links[1].SpanContext.SpanID())
}

func TestLoggerNamesTheTraceOfRecordsInsideASpan(t *testing.T) {
	var buf bytes.Buffer
	log := telemetry.Logger(slog.New(slog.NewJSONHandler(&buf, nil)).With("consumer", "c"))
	assert.Same(t, log, telemetry.Logger(log), "wrapped once")

	log.InfoContext(context.Background(), "outside")
	assert.NotContains(t, buf.String(), telemetry.LogTraceID)

	ctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "step")
	defer span.End()
	buf.Reset()
	log.InfoContext(ctx, "inside", slog.String("stream", "s"))
	assert.Contains(t, buf.String(), `"trace_id":"`+span.SpanContext().TraceID().String()+`"`)
	assert.Contains(t, buf.String(), `"consumer":"c"`)
	assert.Equal(t, trace.SpanContextFromContext(ctx).SpanID().String(), span.SpanContext().SpanID().String())
}

func TestAppendsTraceAndMeasureAnAppend(t *testing.T) {
	rec := oteltest.New(t)
	a := telemetry.NewAppends(telemetry.NewTracer(rec.TracerProvider), rec.MeterProvider.Meter("t"), memory.New())
	ctx, op := a.Start(context.Background(), "order", "order-1", 2, false)
	var md eventstore.Metadata
	telemetry.Inject(ctx, &md)
	op.End(ctx, 3, nil)
	_, op = a.Start(context.Background(), "order", "order-2", 1, false)
	op.End(context.Background(), 0, fmt.Errorf("append: %w", &eventstore.WrongVersionError{Stream: "order-2"}))

	spans := rec.Named("append order")
	require.Len(t, spans, 2)
	assert.Equal(t, trace.SpanKindClient, spans[0].SpanKind())
	assert.Equal(t, spans[0].SpanContext().SpanID(), telemetry.SpanContextOf(md).SpanID(), "the events record the append span")
	v, _ := oteltest.Attr(spans[0], telemetry.VersionKey)
	assert.EqualValues(t, 3, v.AsInt64())
	v, _ = oteltest.Attr(spans[0], telemetry.DBSystemNameKey)
	assert.Equal(t, "memory", v.AsString())
	v, _ = oteltest.Attr(spans[1], telemetry.ErrorTypeKey)
	assert.Equal(t, "*eventstore.WrongVersionError", v.AsString())
	assert.Equal(t, codes.Error, spans[1].Status().Code)

	assert.EqualValues(t, 1, rec.Count(t, "db.client.operation.duration", telemetry.DBCollectionNameKey.String("order"), telemetry.ErrorTypeKey.String("*eventstore.WrongVersionError")))
}

func TestAChildAppendIsTracedOnlyUnderARecordingSpan(t *testing.T) {
	rec := oteltest.New(t)
	a := telemetry.NewAppends(telemetry.NewTracer(rec.TracerProvider), rec.MeterProvider.Meter("t"), nil)
	ctx, op := a.Start(context.Background(), "order", "order-1", 1, true)
	var md eventstore.Metadata
	telemetry.Inject(ctx, &md)
	op.End(ctx, 0, nil)
	assert.Empty(t, rec.Ended())
	assert.Nil(t, md.Extra)

	parent, span := rec.TracerProvider.Tracer("t").Start(context.Background(), "dispatch")
	_, op = a.Start(parent, "order", "order-1", 1, true)
	op.End(parent, 0, nil)
	span.End()
	require.Len(t, rec.Named("append order"), 1)
	assert.Equal(t, span.SpanContext().SpanID(), rec.Named("append order")[0].Parent().SpanID())
	v, _ := oteltest.Attr(rec.Named("append order")[0], telemetry.DBSystemNameKey)
	assert.Equal(t, "other", v.AsString())
}

// Components start no span while none can record: a no-op provider, or the
// global one before a service installs an SDK. That the global default is
// still recognised is what keeps tracing that is off within its budget.
func TestTracerIsOffWhileNoSpanCanRecord(t *testing.T) {
	require.True(t, telemetry.NewTracer(nil).Off(), "no test of this package installs a global provider")
	assert.True(t, telemetry.NewTracer(noop.NewTracerProvider()).Off())
	assert.False(t, telemetry.NewTracer(sdktrace.NewTracerProvider()).Off())
	assert.False(t, telemetry.NewTracer(otel.GetTracerProvider()).Off(), "the global provider passed explicitly is always used")
}

func TestADirectAppendIsNotTracedWhileTheTracerIsOff(t *testing.T) {
	rec := oteltest.New(t)
	a := telemetry.NewAppends(telemetry.NewTracer(noop.NewTracerProvider()), rec.MeterProvider.Meter("t"), nil)
	ctx, op := a.Start(context.Background(), "order", "order-1", 1, false)
	assert.False(t, trace.SpanContextFromContext(ctx).IsValid())
	op.End(ctx, 0, nil)
	assert.EqualValues(t, 1, rec.Count(t, "db.client.operation.duration", telemetry.DBCollectionNameKey.String("order")), "measured all the same")
}
