package waterfall_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/tools/tracepic/waterfall"
)

// fixture is a small hand-made trace of two orders, shaped like Cairn's,
// written by two processes as the stdout exporter writes them:
//
//	parent: dispatch PlaceOrder (order-1) > append order          [A1]
//	        dispatch PlaceOrder (order-2) > append order          [A2]
//	        dispatch AuthorizePayment (payment-1) > append payment [A3]
//	sale:   process sale, links A1 and A2 (a batch of two orders)
//	          > handle OrderPlaced (link A1) > step sale (link A1) > append saga:sale [R1]
//	          > handle OrderPlaced (link A2) > step sale (link A2) > append saga:sale [R2]
//	        process outbox (link R1) > send MakeReservation (link R1)
//	          > dispatch MakeReservation > append seats (a retry event, error status)
//	        process sale (link A3) > handle PaymentAuthorized > step sale
//	        append saga:sale whose parent step never ended (a process killed mid-step)
//
// The sale process writes each span as it starts too, as the reservation
// example's sale processes do, so the step the kill interrupted is there,
// unfinished.
type fixture struct {
	parent, sale bytes.Buffer
	// ids by the names above, and by span name for the rest.
	ids map[string]trace.SpanID
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{ids: map[string]trace.SpanID{}}
	provider := func(w io.Writer, role string, starts bool) *sdktrace.TracerProvider {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
		require.NoError(t, err)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "reservation"), attribute.String("reservation.process", role),
			attribute.String("service.instance.id", role+"-1"))))
		if starts {
			tp.RegisterSpanProcessor(startWriter{exp})
		}
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	parent, sale := provider(&f.parent, "parent", false).Tracer("t"), provider(&f.sale, "sale #1", true).Tracer("t")
	base := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	clock := 0
	at := func() trace.SpanStartEventOption {
		clock++
		return trace.WithTimestamp(base.Add(time.Duration(clock) * time.Millisecond))
	}
	var open []trace.Span
	start := func(tr trace.Tracer, ctx context.Context, key, name string, kind trace.SpanKind, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.SpanContext) {
		ctx, s := tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithLinks(links...), trace.WithAttributes(attrs...), at())
		f.ids[key] = s.SpanContext().SpanID()
		open = append(open, s)
		return ctx, s.SpanContext()
	}
	end := func() { // ends every open span, innermost first
		for i := len(open) - 1; i >= 0; i-- {
			open[i].End(trace.WithTimestamp(base.Add(time.Duration(clock+len(open)-i) * time.Millisecond)))
		}
		clock += len(open) + 1
		open = nil
	}
	endLast := func(n int) { // ends the n innermost open spans
		for i := len(open) - 1; i >= len(open)-n; i-- {
			clock++
			open[i].End(trace.WithTimestamp(base.Add(time.Duration(clock) * time.Millisecond)))
		}
		open = open[:len(open)-n]
	}
	link := func(sc ...trace.SpanContext) []trace.Link {
		var l []trace.Link
		for _, c := range sc {
			l = append(l, trace.Link{SpanContext: c})
		}
		return l
	}
	bg := context.Background()
	stream := attribute.Key("cairn.stream").String

	ctx, _ := start(parent, bg, "D1", "dispatch PlaceOrder", trace.SpanKindInternal, nil, stream("order-1"), attribute.String("cairn.outcome", "handled"))
	_, a1 := start(parent, ctx, "A1", "append order", trace.SpanKindClient, nil, stream("order-1"))
	end()
	ctx, _ = start(parent, bg, "D2", "dispatch PlaceOrder", trace.SpanKindInternal, nil, stream("order-2"))
	_, a2 := start(parent, ctx, "A2", "append order", trace.SpanKindClient, nil, stream("order-2"))
	end()

	batch, _ := start(sale, bg, "B", "process sale", trace.SpanKindConsumer, link(a1, a2))
	ctx, _ = start(sale, batch, "H1", "handle OrderPlaced", trace.SpanKindConsumer, link(a1))
	ctx, _ = start(sale, ctx, "S1", "step sale", trace.SpanKindInternal, link(a1))
	_, r1 := start(sale, ctx, "R1", "append saga:sale", trace.SpanKindClient, nil)
	endLast(3)
	ctx, _ = start(sale, batch, "H2", "handle OrderPlaced", trace.SpanKindConsumer, link(a2))
	ctx, _ = start(sale, ctx, "S2", "step sale", trace.SpanKindInternal, link(a2))
	start(sale, ctx, "R2", "append saga:sale", trace.SpanKindClient, nil)
	end()

	ctx, _ = start(sale, bg, "O", "process outbox", trace.SpanKindConsumer, link(r1))
	ctx, _ = start(sale, ctx, "X1", "send MakeReservation", trace.SpanKindProducer, link(r1))
	ctx, _ = start(sale, ctx, "D4", "dispatch MakeReservation", trace.SpanKindInternal, nil, stream("seats-1"))
	_, s := sale.Start(ctx, "append seats", trace.WithSpanKind(trace.SpanKindClient), at())
	f.ids["A4"] = s.SpanContext().SpanID()
	s.AddEvent("retry", trace.WithTimestamp(base.Add(time.Duration(clock)*time.Millisecond)))
	s.SetStatus(codes.Error, "conflict")
	open = append(open, s)
	end()

	ctx, _ = start(parent, bg, "D3", "dispatch AuthorizePayment", trace.SpanKindInternal, nil, stream("payment-1"))
	_, a3 := start(parent, ctx, "A3", "append payment", trace.SpanKindClient, nil, stream("payment-1"))
	end()
	ctx, _ = start(sale, bg, "B2", "process sale", trace.SpanKindConsumer, link(a3))
	ctx, _ = start(sale, ctx, "H3", "handle PaymentAuthorized", trace.SpanKindConsumer, link(a3))
	start(sale, ctx, "S3", "step sale", trace.SpanKindInternal, link(a3))
	end()

	// A step that a kill interrupted: its append ended (and was
	// written), the step itself never did.
	ctx, killed := sale.Start(bg, "step sale", at())
	f.ids["KS"] = killed.SpanContext().SpanID()
	_, s = sale.Start(ctx, "append saga:sale", at())
	f.ids["K"] = s.SpanContext().SpanID()
	s.End()
	_ = killed // never ended

	// A send the kill interrupted (it never ended, and had not reported
	// its link), whose dispatch handled command cmd-9; and the send of the
	// restarted process, linked to R1, whose dispatch of cmd-9 was absorbed
	// as a duplicate.
	ctx, interrupted := sale.Start(bg, "send MakePayment", trace.WithSpanKind(trace.SpanKindProducer), at())
	f.ids["U"] = interrupted.SpanContext().SpanID()
	ctx, _ = start(sale, ctx, "DU", "dispatch MakePayment", trace.SpanKindInternal, nil, stream("payment-1"), attribute.String("cairn.command_id", "cmd-9"), attribute.String("cairn.outcome", "handled"))
	start(sale, ctx, "AU", "append payment", trace.SpanKindClient, nil, stream("payment-1"))
	end()
	ctx, _ = start(sale, bg, "X2", "send MakePayment", trace.SpanKindProducer, link(r1))
	start(sale, ctx, "DX2", "dispatch MakePayment", trace.SpanKindInternal, nil, stream("payment-1"), attribute.String("cairn.command_id", "cmd-9"), attribute.String("cairn.outcome", "duplicate"))
	end()
	return f
}

func (f *fixture) read(t *testing.T) []waterfall.Span {
	t.Helper()
	a, skipped, err := waterfall.Read(&f.parent)
	require.NoError(t, err)
	require.Zero(t, skipped)
	b, skipped, err := waterfall.Read(&f.sale)
	require.NoError(t, err)
	require.Zero(t, skipped)
	require.Len(t, b, 2*19+2, "the sale's spans as they started, and as they ended but the two the kill interrupted")
	return waterfall.Dedupe(append(a, b...))
}

// startWriter writes each span as it starts (as the example's does).
type startWriter struct{ exp sdktrace.SpanExporter }

func (w startWriter) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	_ = w.exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s})
}
func (startWriter) OnEnd(sdktrace.ReadOnlySpan)      {}
func (startWriter) Shutdown(context.Context) error   { return nil }
func (startWriter) ForceFlush(context.Context) error { return nil }

func (f *fixture) names(spans []waterfall.Span) []string {
	var out []string
	for _, s := range spans {
		for k, id := range f.ids {
			if id == s.ID() {
				out = append(out, k)
			}
		}
	}
	return out
}

func TestReadGivesBackWhatTheExporterWrote(t *testing.T) {
	f := newFixture(t)
	spans := f.read(t)
	require.Len(t, spans, 27)
	byID := map[trace.SpanID]waterfall.Span{}
	for _, s := range spans {
		byID[s.ID()] = s
	}
	x1 := byID[f.ids["X1"]]
	assert.Equal(t, "send MakeReservation", x1.Name)
	assert.Equal(t, trace.SpanKindProducer, x1.Kind)
	assert.Equal(t, f.ids["O"], x1.Parent.SpanID())
	require.Len(t, x1.Links, 1)
	assert.Equal(t, f.ids["R1"], x1.Links[0].SpanID())
	assert.Positive(t, x1.Duration())
	role, _ := x1.ResourceAttr("reservation.process")
	assert.Equal(t, "sale #1", role.AsString())

	d1 := byID[f.ids["D1"]]
	assert.False(t, d1.Parent.IsValid(), "a root's parent")
	v, ok := d1.Attr("cairn.stream")
	require.True(t, ok)
	assert.Equal(t, "order-1", v.AsString())

	a4 := byID[f.ids["A4"]]
	assert.Equal(t, codes.Error, a4.Status)
	require.Len(t, a4.Events, 1)
	assert.Equal(t, "retry", a4.Events[0].Name)

	// The step the kill interrupted is there as it started; every span
	// that ended is there as it ended.
	for _, s := range spans {
		assert.Equal(t, s.ID() == f.ids["KS"] || s.ID() == f.ids["U"], s.Unfinished(), s.Name)
	}
	assert.Zero(t, byID[f.ids["KS"]].Duration())
	assert.Len(t, a4.Events, 1, "the ended record, with what happened after the start")

	// And back to the SDK's spans, for oteltest's checks: the killed
	// step's append has its parent, the unfinished step.
	assert.Empty(t, oteltest.Orphans(waterfall.SDK(spans)))
	withoutStarts := slices.DeleteFunc(slices.Clone(spans), waterfall.Span.Unfinished)
	var orphans []string
	for _, o := range oteltest.Orphans(waterfall.SDK(withoutStarts)) {
		orphans = append(orphans, f.names([]waterfall.Span{{Context: o.SpanContext()}})...)
	}
	assert.ElementsMatch(t, []string{"K", "DU"}, orphans, "without the start records, what the kill interrupted is lost")
	assert.Len(t, waterfall.FromSDK(waterfall.SDK(spans)), len(spans))
}

func TestReadSkipsWhatIsNotASpan(t *testing.T) {
	f := newFixture(t)
	whole := f.sale.String()
	lines := strings.SplitAfter(strings.TrimSuffix(whole, "\n"), "\n")
	cut := strings.Join(lines[:len(lines)-1], "") + lines[len(lines)-1][:40] // killed mid-write
	in := "\n{\"Resource\":[],\"ScopeMetrics\":null}\nnot json at all\n" + cut
	spans, skipped, err := waterfall.Read(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, 3, skipped, "a metrics line, garbage and the cut line")
	assert.Len(t, spans, len(lines)-1)
}

func TestPictureFollowsOneOrderAcrossTracesAndProcesses(t *testing.T) {
	f := newFixture(t)
	spans := f.read(t)
	roots := waterfall.Roots(spans, waterfall.OfAggregate("1"))
	require.Len(t, roots, 2, "the order's two commands from outside, not the outbox's")
	assert.Equal(t, []string{"D1", "D3"}, f.names(roots), "earliest first")

	var ids []trace.SpanID
	for _, r := range roots {
		ids = append(ids, r.ID())
	}
	picture := waterfall.Picture(spans, ids...)
	got := f.names(picture)
	assert.Equal(t, []string{"D1", "A1", "B", "H1", "S1", "R1", "O", "X1", "D4", "A4", "D3", "A3", "B2", "H3", "S3", "U", "DU", "AU", "X2", "DX2"}, got,
		"what the order's commands caused, by start: the batch that also held order 2 is shown, its handling of order 2 is not; "+
			"the dispatch of cmd-9 that a send interrupted by the kill made is, through the duplicate dispatch of the same command")
	var dx2 waterfall.Span
	for _, s := range spans {
		if s.ID() == f.ids["DX2"] {
			dx2 = s
		}
	}
	assert.Equal(t, []string{"DU"}, f.names(waterfall.SameCommand(spans, dx2)))

	depth := waterfall.Depths(picture)
	assert.Equal(t, 0, depth[f.ids["B"]])
	assert.Equal(t, 2, depth[f.ids["S1"]])
	assert.Equal(t, 2, depth[f.ids["D4"]], "the dispatch under the send, under the outbox's batch")

	all := f.names(waterfall.Connected(spans, roots[0].ID()))
	assert.Contains(t, all, "D2", "every edge both ways joins the orders that shared a batch")
	assert.NotContains(t, all, "K")
	assert.Len(t, oteltest.Reachable(waterfall.SDK(spans), roots[0].ID()), len(all), "Connected is oteltest.Reachable")

	assert.Equal(t, []string{"D1"}, f.names(waterfall.Roots(spans, waterfall.OnStream("order-1"))))
	assert.Empty(t, waterfall.Picture(spans, trace.SpanID{1}), "an unknown start")
}

func TestDrawHasARowPerSpanAndAConnectorPerLink(t *testing.T) {
	f := newFixture(t)
	spans := f.read(t)
	var roots []trace.SpanID
	for _, r := range waterfall.Roots(spans, waterfall.OfAggregate("1")) {
		roots = append(roots, r.ID())
	}
	picture := waterfall.Picture(spans, roots...)
	var out bytes.Buffer
	require.NoError(t, waterfall.Draw(&out, picture, waterfall.Options{Title: "order 1 <&>"}))
	svg := out.String()

	// Well-formed XML, whatever the names hold.
	dec := xml.NewDecoder(strings.NewReader(svg))
	var texts []string
	var bars, links, same, events int
	var stack []string // the open elements
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			if tok.Name.Local == "rect" && attr(tok, "height") == "12" {
				bars++
			}
			if tok.Name.Local == "path" && attr(tok, "stroke-dasharray") == "4,3" {
				links++
			}
			if tok.Name.Local == "path" && attr(tok, "stroke-dasharray") == "1,3" {
				same++
			}
			if tok.Name.Local == "line" && attr(tok, "stroke") == "#000" {
				events++
			}
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "text" {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	assert.Contains(t, texts, "order 1 <&>")
	assert.Equal(t, len(picture), bars, "a bar per span, dashed for the one that never ended")
	assert.Contains(t, texts, "never ended", "and the send the kill interrupted")
	// In the picture: B, H1 and S1 link to A1; O, X1 and X2 to R1; B2, H3
	// and S3 to A3.
	assert.Equal(t, 9+1, links, "a dashed connector per link inside the picture (and the legend's)")
	assert.Equal(t, 1+1, same, "a dotted connector between the dispatches of cmd-9 (and the legend's)")
	assert.Equal(t, 1+1, events, "the retry, and the legend's sample")
	rows := 0
	for _, name := range []string{"dispatch PlaceOrder · handled", "append order", "process sale", "handle OrderPlaced", "step sale",
		"append saga:sale", "process outbox", "send MakeReservation", "dispatch MakeReservation", "append seats",
		"dispatch AuthorizePayment", "append payment", "handle PaymentAuthorized", "send MakePayment",
		"dispatch MakePayment · handled", "dispatch MakePayment · duplicate"} {
		n := count(texts, name)
		assert.Positive(t, n, name)
		rows += n
	}
	assert.Equal(t, len(picture), rows, "a row per span, named")
	assert.Contains(t, texts, "sale #1")
	assert.Contains(t, texts, "parent")
	assert.Less(t, len(svg), 20_000)

	// A span that never ended is drawn as such.
	out.Reset()
	require.NoError(t, waterfall.Draw(&out, waterfall.Connected(spans, f.ids["KS"]), waterfall.Options{}))
	assert.Contains(t, out.String(), ">never ended<")
	assert.Contains(t, out.String(), `stroke-dasharray="3,2"`)

	// Nothing to draw still draws.
	out.Reset()
	require.NoError(t, waterfall.Draw(&out, nil, waterfall.Options{}))
	assert.Contains(t, out.String(), "</svg>")
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func count(texts []string, s string) int {
	return len(slices.DeleteFunc(slices.Clone(texts), func(t string) bool { return t != s }))
}
