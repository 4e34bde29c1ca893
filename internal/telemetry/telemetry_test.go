package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
