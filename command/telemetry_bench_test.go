package command_test

import (
	"context"
	"strconv"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
)

// discard is a span exporter that drops what it is given: the cost of
// tracing measured without the cost of shipping spans anywhere.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// tracedOptions returns bus options with the OpenTelemetry SDK installed
// as a service would: spans sampled by sampler, batched to an exporter
// (one that discards them), and metrics aggregated by a meter provider.
func tracedOptions(b *testing.B, sampler sdktrace.Sampler) command.Options {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return command.Options{TracerProvider: tp, MeterProvider: mp}
}

// BenchmarkDispatchTraced is BenchmarkDispatchStyles's typed dispatch
// with the SDK installed: every dispatch sampled (its dispatch, load,
// decide and append spans, the events' trace context, the metrics), and
// none sampled (the outermost span and the metrics only). Tracing off (no
// provider installed) is BenchmarkDispatchStyles itself, measured against
// the commit before tracing in docs/benchmarks.md.
func BenchmarkDispatchTraced(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"Sampled", sdktrace.AlwaysSample()}, {"Unsampled", sdktrace.NeverSample()}} {
		b.Run(bc.name, func(b *testing.B) {
			typ, err := aggregate.NewType[typedCounter]("style", aggregate.Options[typedCounter]{},
				aggregate.Handles((*typedCounter).add),
				aggregate.Handles((*typedCounter).sub),
				aggregate.Handles((*typedCounter).reset),
				aggregate.Applies((*typedCounter).added),
				aggregate.Applies((*typedCounter).reseted))
			bus := styleBusWith(b, typ, err, tracedOptions(b, bc.sampler))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				msg := command.Message{ID: strconv.Itoa(i), Command: styleAdd{ID: strconv.Itoa(i / 1000)}}
				if _, err := bus.Dispatch(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
	}
}
