// Package oteltest records what Cairn's components trace and measure, with
// the OpenTelemetry SDK, for tests to look at: the spans that ended, and
// the metrics as a reader collects them.
package oteltest

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Recorder holds a tracer provider that samples every span and keeps those
// that end, and a meter provider read on demand.
type Recorder struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	spans          *tracetest.SpanRecorder
	reader         *sdkmetric.ManualReader
}

// New returns a Recorder whose providers shut down when t ends.
func New(t testing.TB) *Recorder {
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	r := &Recorder{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		spans:          spans,
		reader:         reader,
	}
	t.Cleanup(func() {
		_ = r.TracerProvider.Shutdown(context.Background())
		_ = r.MeterProvider.Shutdown(context.Background())
	})
	return r
}

// Ended returns the spans that have ended, in the order they ended.
func (r *Recorder) Ended() []sdktrace.ReadOnlySpan { return r.spans.Ended() }

// Reset forgets the spans that have ended.
func (r *Recorder) Reset() { r.spans.Reset() }

// Named returns the ended spans called name.
func (r *Recorder) Named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Collect reads every metric now.
func (r *Recorder) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return rm
}

// Int64 returns the value of the int64 counter, up-down counter or gauge
// called name at the data point whose attributes include attrs, and false
// when no data point matches.
func (r *Recorder) Int64(t testing.TB, name string, attrs ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	switch d := r.find(t, name).(type) {
	case metricdata.Sum[int64]:
		return pick(d.DataPoints, attrs)
	case metricdata.Gauge[int64]:
		return pick(d.DataPoints, attrs)
	}
	return 0, false
}

// Float64 is [Recorder.Int64] for float64 instruments.
func (r *Recorder) Float64(t testing.TB, name string, attrs ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	switch d := r.find(t, name).(type) {
	case metricdata.Sum[float64]:
		return pick(d.DataPoints, attrs)
	case metricdata.Gauge[float64]:
		return pick(d.DataPoints, attrs)
	}
	return 0, false
}

// Count returns how many values the histogram called name recorded at
// the data point whose attributes include attrs.
func (r *Recorder) Count(t testing.TB, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	switch d := r.find(t, name).(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if includes(p.Attributes, attrs) {
				return p.Count
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if includes(p.Attributes, attrs) {
				return p.Count
			}
		}
	}
	return 0
}

func (r *Recorder) find(t testing.TB, name string) metricdata.Aggregation {
	t.Helper()
	rm := r.Collect(t)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	return nil
}

func pick[N int64 | float64](points []metricdata.DataPoint[N], attrs []attribute.KeyValue) (N, bool) {
	for _, p := range points {
		if includes(p.Attributes, attrs) {
			return p.Value, true
		}
	}
	return 0, false
}

func includes(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Attr returns the value of span s's attribute key, and false when it has
// none.
func Attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Orphans returns the spans whose parent is in none of spans (a parent in
// another process counts only when it is there too): a trace with a
// missing piece.
func Orphans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	have := make(map[trace.SpanID]bool, len(spans))
	for _, s := range spans {
		have[s.SpanContext().SpanID()] = true
	}
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && !have[p.SpanID()] {
			out = append(out, s)
		}
	}
	return out
}

// Reachable returns the spans reachable from root by following parents to
// children and links to the spans they link to, in either direction: the
// connected picture that root belongs to.
func Reachable(spans []sdktrace.ReadOnlySpan, root trace.SpanID) []sdktrace.ReadOnlySpan {
	next := make(map[trace.SpanID][]trace.SpanID)
	join := func(a, b trace.SpanID) {
		next[a] = append(next[a], b)
		next[b] = append(next[b], a)
	}
	byID := make(map[trace.SpanID]sdktrace.ReadOnlySpan, len(spans))
	for _, s := range spans {
		id := s.SpanContext().SpanID()
		byID[id] = s
		if p := s.Parent(); p.IsValid() {
			join(id, p.SpanID())
		}
		for _, l := range s.Links() {
			join(id, l.SpanContext.SpanID())
		}
	}
	seen := map[trace.SpanID]bool{root: true}
	queue := []trace.SpanID{root}
	var out []sdktrace.ReadOnlySpan
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if s, ok := byID[id]; ok {
			out = append(out, s)
		}
		for _, n := range next[id] {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return out
}

// OpenSpans is a span processor that keeps the spans started and not yet
// ended: a test that ends with any open found a path that leaks a span.
type OpenSpans struct {
	mu   sync.Mutex
	open map[trace.SpanID]string
}

// Counting returns a tracer provider that samples every span, and the
// OpenSpans it reports to; the provider shuts down when t ends.
func Counting(t testing.TB) (*sdktrace.TracerProvider, *OpenSpans) {
	p := &OpenSpans{open: map[trace.SpanID]string{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(p))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, p
}

// OnStart notes s as open.
func (p *OpenSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open[s.SpanContext().SpanID()] = s.Name()
}

// OnEnd notes s as ended.
func (p *OpenSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, s.SpanContext().SpanID())
}

// Shutdown does nothing.
func (p *OpenSpans) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (p *OpenSpans) ForceFlush(context.Context) error { return nil }

// Names returns the names of the spans open now.
func (p *OpenSpans) Names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.open))
	for _, n := range p.open {
		out = append(out, n)
	}
	return out
}
