package projection_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/counters"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
	"github.com/cairn-es/cairn/retry"
)

// tracedAppend appends items first..first+n-1 to stream as Cairn's own
// writers do under an `append` span of rec: each event records the span's
// context. It returns the span's context.
func tracedAppend(t *testing.T, rec *oteltest.Recorder, s eventstore.Store, stream string, first, n int) trace.SpanContext {
	t.Helper()
	ctx, span := rec.TracerProvider.Tracer("test").Start(context.Background(), "append "+stream)
	defer span.End()
	events := make([]eventstore.EventData, n)
	for i := range events {
		events[i] = eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, first+i),
			Metadata: eventstore.Metadata{CorrelationID: "flow-1"}}
		telemetry.Inject(ctx, &events[i].Metadata)
	}
	_, err := s.Append(trusted.Writer(ctx), stream, eventstore.Any, events...)
	require.NoError(t, err)
	return span.SpanContext()
}

// appendItems appends items first..first+n-1 to stream, untraced.
func appendItems(t *testing.T, s eventstore.Store, stream string, first, n int) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		events := make([]eventstore.EventData, min(1000, n-start))
		for i := range events {
			events[i] = eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, first+start+i)}
		}
		_, err := s.Append(context.Background(), stream, eventstore.Any, events...)
		require.NoError(t, err)
	}
}

func attr(t *testing.T, s sdktrace.ReadOnlySpan, key string) any {
	t.Helper()
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

func linkIDs(s sdktrace.ReadOnlySpan) []trace.SpanID {
	var ids []trace.SpanID
	for _, l := range s.Links() {
		ids = append(ids, l.SpanContext.SpanID())
	}
	return ids
}

// handlerSpans keeps the span context each handler call ran under, by
// event.
type handlerSpans struct {
	mu   sync.Mutex
	seen map[int]trace.SpanContext
}

func (h *handlerSpans) record(ctx context.Context, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = make(map[int]trace.SpanContext)
	}
	h.seen[n] = trace.SpanContextFromContext(ctx)
}

func (h *handlerSpans) get(n int) trace.SpanContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[n]
}

// TestABatchIsARootSpanLinkedToItsAppends: the batch's `process` span is a
// new trace whatever span the caller runs the consumer under (linked to
// it), links to the append spans its events were stored under, and parents
// one `handle` span per event, each linked to its own event's append and
// carried by the context the handler gets. Consumed events and batches are
// counted.
func TestABatchIsARootSpanLinkedToItsAppends(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	first := tracedAppend(t, rec, events, "item-1", 0, 2)
	second := tracedAppend(t, rec, events, "item-2", 2, 1)
	var spans handlerSpans
	c, err := projection.New("traced", events, projectiontest.Registry(t), memory.New(),
		projection.Typed(func(ctx context.Context, v projectiontest.Item, _ codec.Decoded) error {
			spans.record(ctx, v.N)
			return nil
		}), projection.Options{Filter: eventstore.Filter{StreamPrefixes: []string{"item-"}},
			TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)

	ambient, caller := rec.TracerProvider.Tracer("test").Start(context.Background(), "caller")
	require.NoError(t, c.CatchUp(ambient))
	caller.End()

	process := rec.Named("process traced")
	require.Len(t, process, 1, "one batch")
	batch := process[0]
	assert.Equal(t, trace.SpanKindConsumer, batch.SpanKind())
	assert.False(t, batch.Parent().IsValid(), "a new root")
	assert.NotEqual(t, caller.SpanContext().TraceID(), batch.SpanContext().TraceID())
	assert.Equal(t, []trace.SpanID{caller.SpanContext().SpanID(), first.SpanID(), second.SpanID()}, linkIDs(batch),
		"linked to the caller's span, then to each append once")
	assert.Equal(t, "cairn", attr(t, batch, "messaging.system"))
	assert.Equal(t, "process", attr(t, batch, "messaging.operation.name"))
	assert.Equal(t, "process", attr(t, batch, "messaging.operation.type"))
	assert.Equal(t, "traced", attr(t, batch, "messaging.consumer.group.name"))
	assert.Equal(t, "item-", attr(t, batch, "messaging.destination.name"))
	assert.EqualValues(t, 3, attr(t, batch, "messaging.batch.message_count"))
	assert.Equal(t, codes.Unset, batch.Status().Code)

	handles := rec.Named("handle ptest.item")
	require.Len(t, handles, 3)
	for i, h := range handles {
		assert.Equal(t, trace.SpanKindConsumer, h.SpanKind())
		assert.Equal(t, batch.SpanContext().SpanID(), h.Parent().SpanID(), "a child of the batch")
		assert.Equal(t, batch.SpanContext().TraceID(), h.SpanContext().TraceID())
		want := first
		if i == 2 {
			want = second
		}
		assert.Equal(t, []trace.SpanID{want.SpanID()}, linkIDs(h), "one link, to its own event's append")
		assert.Equal(t, h.SpanContext().SpanID(), spans.get(i).SpanID(), "the handler runs under its event's span")
		assert.Equal(t, "flow-1", attr(t, h, "messaging.message.conversation_id"))
		assert.Equal(t, "ptest.item", attr(t, h, "cairn.event.type"))
		assert.NotEmpty(t, attr(t, h, "messaging.message.id"))
		assert.NotEmpty(t, attr(t, h, "cairn.position"))
	}
	assert.Equal(t, "item-1", attr(t, handles[1], "cairn.stream"))
	assert.EqualValues(t, 1, attr(t, handles[1], "cairn.version"))
	assert.Equal(t, "item-2", attr(t, handles[2], "cairn.stream"))

	group := telemetry.MessagingConsumerGroupKey.String("traced")
	consumed, ok := rec.Int64(t, "messaging.client.consumed.messages", group, telemetry.MessagingSystem)
	require.True(t, ok)
	assert.EqualValues(t, 3, consumed, "one per event handled")
	assert.EqualValues(t, 1, rec.Count(t, "messaging.process.duration", group, telemetry.MessagingOperationNameKey.String("process")))
}

// TestAnIdleConsumerTracesNothing: a read that finds nothing hands no
// batch over, and makes no span.
func TestAnIdleConsumerTracesNothing(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	c, err := projection.New("idle", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard(), MaxBatchDelay: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, c.Run(ctx))
	assert.Empty(t, rec.Ended())
	_, ok := rec.Int64(t, "messaging.client.consumed.messages")
	assert.False(t, ok)
}

// TestAParkedEventFailsItsHandleSpan: a retry is an event of the event's
// handle span, and parking it another that marks the span as failed; the
// batch goes on, and its span does not fail. So for a plain consumer and a
// transactional one (whose batch transaction rolls back and handles each
// event alone).
func TestAParkedEventFailsItsHandleSpan(t *testing.T) {
	for _, tx := range []bool{false, true} {
		t.Run(fmt.Sprintf("tx=%v", tx), func(t *testing.T) {
			rec := oteltest.New(t)
			events := memory.New()
			t.Cleanup(func() { _ = events.Close() })
			consumers := memory.New()
			tracedAppend(t, rec, events, "item-1", 0, 3)
			boom := errors.New("boom")
			fail := func(n int) error {
				if n == 1 {
					return boom
				}
				return nil
			}
			opts := projection.Options{Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond},
				TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()}
			var c *projection.Consumer
			var err error
			if tx {
				c, err = projection.NewTx("parking", events, projectiontest.Registry(t), consumers,
					projection.TypedTx(func(ctx context.Context, tx *memory.Tx, v projectiontest.Item, _ codec.Decoded) error {
						return fail(v.N)
					}), opts)
			} else {
				c, err = projection.New("parking", events, projectiontest.Registry(t), consumers,
					projection.Typed(func(ctx context.Context, v projectiontest.Item, _ codec.Decoded) error {
						return fail(v.N)
					}), opts)
			}
			require.NoError(t, err)
			require.NoError(t, c.CatchUp(context.Background()))

			batch := rec.Named("process parking")
			require.Len(t, batch, 1)
			assert.Equal(t, codes.Unset, batch[0].Status().Code, "the batch went on")
			var parked sdktrace.ReadOnlySpan
			for _, h := range rec.Named("handle ptest.item") {
				assert.Equal(t, batch[0].SpanContext().SpanID(), h.Parent().SpanID())
				if h.Status().Code == codes.Error {
					require.Nil(t, parked, "one failed handle span")
					parked = h
				}
			}
			require.NotNil(t, parked)
			assert.EqualValues(t, 1, attr(t, parked, "cairn.version"))
			var names []string
			for _, e := range parked.Events() {
				names = append(names, e.Name)
			}
			assert.Equal(t, []string{"retry", "dead_letter"}, names)
			n, err := consumers.CountDeadLetters(context.Background(), "parking")
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
}

// TestAFailedBatchFailsItsSpan: a consumer that stops on a failure
// ([projection.Stop]) fails the batch's span and its event's, and measures
// the batch with its error's type.
func TestAFailedBatchFailsItsSpan(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	tracedAppend(t, rec, events, "item-1", 0, 1)
	c, err := projection.New("stopping", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return errors.New("boom") },
		projection.Options{OnFailure: projection.Stop, Retry: retry.Policy{Attempts: 1},
			TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	require.ErrorIs(t, c.CatchUp(context.Background()), projection.ErrHandlerFailed)
	batch := rec.Named("process stopping")
	require.Len(t, batch, 1)
	assert.Equal(t, codes.Error, batch[0].Status().Code)
	assert.Equal(t, "*projection.HandlerError", attr(t, batch[0], "error.type"))
	require.Len(t, rec.Named("handle ptest.item"), 1)
	assert.Equal(t, codes.Error, rec.Named("handle ptest.item")[0].Status().Code)
	assert.EqualValues(t, 1, rec.Count(t, "messaging.process.duration", telemetry.ErrorTypeKey.String("*projection.HandlerError")))
}

// TestABatchHandlerRunsUnderTheBatchSpan: a component's batch handler (a
// saga runner's, through internal/batchconsumer) gets the batch span in
// its context, with the providers of the options it passed; its failed
// attempts are the span's retry events.
func TestABatchHandlerRunsUnderTheBatchSpan(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	appended := tracedAppend(t, rec, events, "item-1", 0, 2)
	var got trace.SpanContext
	calls := 0
	c, err := batchconsumer.New[*projection.Consumer]("saga:order", events, memory.New(), func(ctx context.Context, evs []eventstore.Event) error {
		calls++
		if calls == 1 {
			return errors.New("store down")
		}
		got = trace.SpanContextFromContext(ctx)
		return nil
	}, nil, projection.Options{Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond},
		TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	batch := rec.Named("process saga:order")
	require.Len(t, batch, 1)
	assert.Equal(t, batch[0].SpanContext().SpanID(), got.SpanID())
	assert.Equal(t, []trace.SpanID{appended.SpanID()}, linkIDs(batch[0]))
	require.Len(t, batch[0].Events(), 1)
	assert.Equal(t, "retry", batch[0].Events()[0].Name)
	assert.Empty(t, rec.Named("handle ptest.item"), "a batch handler steps the events itself")
	consumed, _ := rec.Int64(t, "messaging.client.consumed.messages", telemetry.MessagingConsumerGroupKey.String("saga:order"))
	assert.EqualValues(t, 2, consumed)
}

// TestARebuildIsASpanItsBatchesLinkTo: a rebuild is a root span that
// counts what it handled; its batches' spans are roots linked to it.
func TestARebuildIsASpanItsBatchesLinkTo(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	appendItems(t, events, "item-1", 0, 5)
	c, err := projection.New("rebuilt", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{BatchSize: 2, TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	rec.Reset()
	require.NoError(t, c.Rebuild(context.Background(), projection.RebuildOptions{}))
	rebuild := rec.Named("rebuild rebuilt")
	require.Len(t, rebuild, 1)
	assert.Equal(t, trace.SpanKindInternal, rebuild[0].SpanKind())
	assert.False(t, rebuild[0].Parent().IsValid())
	assert.EqualValues(t, 5, attr(t, rebuild[0], "cairn.rebuild.events"))
	batches := rec.Named("process rebuilt")
	require.Len(t, batches, 3)
	for _, b := range batches {
		assert.False(t, b.Parent().IsValid())
		assert.Equal(t, []trace.SpanID{rebuild[0].SpanContext().SpanID()}, linkIDs(b))
	}
}

// TestNoSpansWithANoopTracer: with a no-op tracer provider nothing is
// traced, the handler gets no recording span, and the metrics still count.
func TestNoSpansWithANoopTracer(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	tracedAppend(t, rec, events, "item-1", 0, 3)
	rec.Reset()
	recording := 0
	c, err := projection.New("quiet", events, projectiontest.Registry(t), memory.New(),
		func(ctx context.Context, _ codec.Decoded) error {
			if trace.SpanFromContext(ctx).IsRecording() {
				recording++
			}
			return nil
		}, projection.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	assert.Empty(t, rec.Ended())
	assert.Zero(t, recording)
	consumed, _ := rec.Int64(t, "messaging.client.consumed.messages", telemetry.MessagingConsumerGroupKey.String("quiet"))
	assert.EqualValues(t, 3, consumed)

	// Both providers no-ops: nothing breaks.
	c, err = projection.New("silent", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil },
		projection.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Logger: discard()})
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(context.Background()))
	require.NoError(t, c.Rebuild(context.Background(), projection.RebuildOptions{}))
}

// TestTracedOnSQLite: a transactional consumer on SQLite traces its
// batch and events, its handler runs under its event's span in the
// batch's transaction, and its lag is read from the file.
func TestTracedOnSQLite(t *testing.T) {
	defer projection.SetLagCache(0)()
	rec := oteltest.New(t)
	h := sqliteHarness()
	st := h.New(t)
	appended := tracedAppend(t, rec, st.Events, "item-1", 0, 3)
	var spans handlerSpans
	c, err := projection.NewTx("sqlite", st.Events, projectiontest.Registry(t), st.Consumers,
		projection.TypedTx(func(ctx context.Context, tx *sql.Tx, v projectiontest.Item, _ codec.Decoded) error {
			spans.record(ctx, v.N)
			return counters.AddSQL(ctx, tx, "total", 1)
		}), projection.Options{TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider, Logger: discard()})
	require.NoError(t, err)
	group := telemetry.MessagingConsumerGroupKey.String("sqlite")
	lag, _ := rec.Int64(t, "cairn.consumer.lag", group)
	assert.EqualValues(t, 3, lag)

	require.NoError(t, c.CatchUp(context.Background()))
	assert.EqualValues(t, 3, h.Get(t, st, "total"))
	batch := rec.Named("process sqlite")
	require.Len(t, batch, 1)
	assert.Equal(t, []trace.SpanID{appended.SpanID()}, linkIDs(batch[0]))
	handles := rec.Named("handle ptest.item")
	require.Len(t, handles, 3)
	for i, hs := range handles {
		assert.Equal(t, batch[0].SpanContext().SpanID(), hs.Parent().SpanID())
		assert.Equal(t, hs.SpanContext().SpanID(), spans.get(i).SpanID())
	}
	lag, _ = rec.Int64(t, "cairn.consumer.lag", group)
	assert.EqualValues(t, 0, lag)
	parked, ok := rec.Int64(t, "cairn.consumer.dead_letters", group)
	assert.True(t, ok)
	assert.EqualValues(t, 0, parked)
}

// TestTheGlobalProviderIsFollowed: a consumer built without a provider
// traces through the global one as soon as the service installs it, even
// after the consumer was built.
func TestTheGlobalProviderIsFollowed(t *testing.T) {
	rec := oteltest.New(t)
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	c, err := projection.New("global", events, projectiontest.Registry(t), memory.New(),
		func(context.Context, codec.Decoded) error { return nil }, projection.Options{Logger: discard()})
	require.NoError(t, err)
	appendItems(t, events, "item-1", 0, 1)
	require.NoError(t, c.CatchUp(context.Background()))
	assert.Empty(t, rec.Named("process global"))

	otel.SetTracerProvider(rec.TracerProvider)
	t.Cleanup(func() { otel.SetTracerProvider(tracenoop.NewTracerProvider()) })
	appendItems(t, events, "item-1", 1, 1)
	require.NoError(t, c.CatchUp(context.Background()))
	require.Len(t, rec.Named("process global"), 1)
	assert.Len(t, rec.Named("handle ptest.item"), 1)
}
