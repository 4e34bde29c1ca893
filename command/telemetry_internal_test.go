package command

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
)

type offCommand struct{ ID string }

func (c offCommand) AggregateID() string { return c.ID }

// BenchmarkTelemetryOff runs, alone, every piece of work that tracing and
// metrics add to one dispatch when no provider is installed: the command
// type's lookup, the dispatch span, the checks that skip the load, decide
// and append spans and the events' trace context, the append's timing and
// the metrics. Its time beside a whole dispatch's
// (BenchmarkDispatchStyles) is the cost of tracing off, measured without
// the noise of a 10 µs dispatch on a shared machine (docs/benchmarks.md).
func BenchmarkTelemetryOff(b *testing.B) {
	store := memory.New()
	b.Cleanup(func() { _ = store.Close() })
	bus := New(store, codec.NewRegistry(codec.Options{}), Options{})
	ct := reflect.TypeFor[offCommand]()
	rt := routedType{tel: newCommandTelemetry(typeName(ct, commandName{}), "off")}
	bus.routes[ct] = rt // as Route would, without an aggregate type
	appends := telemetry.NewAppends(telemetry.NewTracer(nil), telemetry.Meter(nil), store)
	ctx := context.Background()
	msg := Message{ID: "m", Command: offCommand{ID: "1"}}
	res := Result{Stream: "off-1", Events: []any{struct{}{}}, Attempts: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var start time.Time
		if bus.tel.duration.Enabled(ctx) {
			start = time.Now()
		}
		ctel := bus.telemetryOf(msg.Command)
		dctx, span := bus.tel.start(ctx, ctel, "m")
		_, load := bus.tel.child(dctx, rt.tel.loadName)
		endChild(load, nil)
		_, decide := bus.tel.child(dctx, rt.tel.decideName)
		endChild(decide, nil)
		actx, op := appends.Start(dctx, "off", "off-1", 1, true)
		if trace.SpanFromContext(actx).IsRecording() {
			var md eventstore.Metadata
			telemetry.Inject(actx, &md)
		}
		op.End(actx, 0, nil)
		if reflect.TypeOf(msg.Command) != ct {
			b.Fatal("type changed")
		}
		bus.tel.end(dctx, span, ctel, &msg, res, nil, start)
	}
}

// The bus starts no dispatch span while the global tracer provider is
// OpenTelemetry's default (see telemetry.Tracer.Off): that default must
// still be recognised, or tracing that is off costs three allocations per
// dispatch again.
func TestTheGlobalDefaultProviderIsRecognised(t *testing.T) {
	require.True(t, telemetry.NewTracer(nil).Off(), "no test of this package installs a global provider")
	assert.False(t, telemetry.NewTracer(sdktrace.NewTracerProvider()).Off())
	assert.True(t, telemetry.NewTracer(noop.NewTracerProvider()).Off())
	assert.False(t, telemetry.NewTracer(otel.GetTracerProvider()).Off(), "the global provider passed explicitly is always used")

	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	idle := New(store, codec.NewRegistry(codec.Options{}), Options{})
	assert.True(t, idle.tel.tracer.Off())
	_, span := idle.tel.start(context.Background(), nilCommand, "")
	assert.Nil(t, span, "no span while no SDK is installed")
	explicit := New(store, codec.NewRegistry(codec.Options{}), Options{TracerProvider: otel.GetTracerProvider()})
	assert.False(t, explicit.tel.tracer.Off(), "the global provider passed explicitly is always asked")
	_, span = explicit.tel.start(context.Background(), nilCommand, "")
	require.NotNil(t, span)
	span.End()
}
