// Package waterfall reads the spans that OpenTelemetry's stdout exporter
// writes (one JSON span per line), picks the spans of one picture (what a
// command caused, across traces and processes), and draws them as an SVG
// waterfall. It is the library of the tracepic tool, and the end-to-end
// tests use it to merge the span files of child processes with the spans
// recorded in the test process.
package waterfall

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Span is one span as the exporter wrote it.
type Span struct {
	Name       string
	Context    trace.SpanContext
	Parent     trace.SpanContext // invalid for a root
	Kind       trace.SpanKind
	Start, End time.Time
	Attributes []attribute.KeyValue
	Events     []Event
	Links      []trace.SpanContext
	Status     codes.Code
	// StatusDescription is the status's message, for an error.
	StatusDescription string
	// Resource is the resource of the process that made the span.
	Resource []attribute.KeyValue
	Scope    string
}

// Event is a span event ("retry", "dead_letter").
type Event struct {
	Name       string
	Time       time.Time
	Attributes []attribute.KeyValue
}

// ID returns the span's ID.
func (s Span) ID() trace.SpanID { return s.Context.SpanID() }

// Attr returns the value of the span's attribute key, and false when it
// has none.
func (s Span) Attr(key attribute.Key) (attribute.Value, bool) { return find(s.Attributes, key) }

// ResourceAttr returns the value of the span's resource attribute key.
func (s Span) ResourceAttr(key attribute.Key) (attribute.Value, bool) { return find(s.Resource, key) }

func find(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Duration is how long the span lasted; 0 for an unfinished one.
func (s Span) Duration() time.Duration {
	if s.Unfinished() {
		return 0
	}
	return s.End.Sub(s.Start)
}

// Unfinished reports whether the span never ended: what a process wrote of
// a span as it started, when it was killed before the span ended.
func (s Span) Unfinished() bool { return s.End.IsZero() || s.End.Before(s.Start) }

// Dedupe returns spans with one record per span, in the order of their
// first: the record of its end where there is one, else the record of its
// start (a process that writes both, and was killed before the end).
func Dedupe(spans []Span) []Span {
	at := make(map[trace.SpanID]int, len(spans))
	out := make([]Span, 0, len(spans))
	for _, s := range spans {
		i, seen := at[s.ID()]
		switch {
		case !seen:
			at[s.ID()] = len(out)
			out = append(out, s)
		case out[i].Unfinished() && !s.Unfinished():
			out[i] = s
		}
	}
	return out
}

// The JSON the stdout exporter writes (a tracetest.SpanStub encoded by
// encoding/json): read by hand, since the SDK's types marshal to JSON but
// do not unmarshal from it.
type (
	jsonSpan struct {
		Name        string
		SpanContext *jsonContext
		Parent      jsonContext
		SpanKind    int
		StartTime   time.Time
		EndTime     time.Time
		Attributes  []jsonKV
		Events      []struct {
			Name       string
			Attributes []jsonKV
			Time       time.Time
		}
		Links []struct {
			SpanContext jsonContext
		}
		Status struct {
			Code        string
			Description string
		}
		Resource             []jsonKV
		InstrumentationScope struct{ Name string }
	}
	jsonContext struct {
		TraceID, SpanID, TraceFlags, TraceState string
		Remote                                  bool
	}
	jsonKV struct {
		Key   string
		Value struct {
			Type  string
			Value json.RawMessage
		}
	}
)

// Read reads the spans in r, one JSON span per line. A line that is not a
// span (a cut last line of a process killed mid-write, a line of another
// kind) is skipped and counted in skipped; err is r's.
func Read(r io.Reader) (spans []Span, skipped int, err error) {
	sc := bufio.NewScanner(r)
	// A span with many links and attributes is long; far longer ones are
	// not a span this reads.
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		s, ok := parse(line)
		if !ok {
			skipped++
			continue
		}
		spans = append(spans, s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return spans, skipped + 1, fmt.Errorf("a line longer than 16 MiB: %w", err)
		}
		return spans, skipped, err
	}
	return spans, skipped, nil
}

// ReadFiles reads the spans of every file in paths, one record per span
// (see [Dedupe]).
func ReadFiles(paths ...string) (spans []Span, skipped int, err error) {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, skipped, err
		}
		got, n, err := Read(f)
		_ = f.Close()
		if err != nil {
			return nil, skipped, fmt.Errorf("%s: %w", p, err)
		}
		spans, skipped = append(spans, got...), skipped+n
	}
	return Dedupe(spans), skipped, nil
}

func parse(line []byte) (Span, bool) {
	var j jsonSpan
	if err := json.Unmarshal(line, &j); err != nil || j.SpanContext == nil || j.Name == "" {
		return Span{}, false
	}
	sc, ok := j.SpanContext.context()
	if !ok {
		return Span{}, false
	}
	s := Span{
		Name: j.Name, Context: sc, Kind: trace.SpanKind(j.SpanKind), Start: j.StartTime, End: j.EndTime,
		Attributes: attrs(j.Attributes), Resource: attrs(j.Resource), Scope: j.InstrumentationScope.Name,
		StatusDescription: j.Status.Description,
	}
	s.Parent, _ = j.Parent.context()
	switch j.Status.Code {
	case "Error":
		s.Status = codes.Error
	case "Ok":
		s.Status = codes.Ok
	}
	for _, e := range j.Events {
		s.Events = append(s.Events, Event{Name: e.Name, Time: e.Time, Attributes: attrs(e.Attributes)})
	}
	for _, l := range j.Links {
		if lc, ok := l.SpanContext.context(); ok {
			s.Links = append(s.Links, lc)
		}
	}
	return s, true
}

// context returns the span context c describes, and false when it is not
// a valid one (the exporter writes zeros for a root's parent).
func (c jsonContext) context() (trace.SpanContext, bool) {
	tid, err := trace.TraceIDFromHex(c.TraceID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(c.SpanID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: c.Remote}
	if c.TraceFlags == "01" {
		cfg.TraceFlags = trace.FlagsSampled
	}
	if ts, err := trace.ParseTraceState(c.TraceState); err == nil {
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg), true
}

// attrs decodes the exporter's attributes; one of a type it does not know
// is dropped.
func attrs(in []jsonKV) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, kv := range in {
		k := attribute.Key(kv.Key)
		raw := kv.Value.Value
		var ok bool
		var v attribute.KeyValue
		switch kv.Value.Type {
		case "BOOL":
			var b bool
			ok, v = json.Unmarshal(raw, &b) == nil, k.Bool(b)
		case "INT64":
			var n int64
			ok, v = json.Unmarshal(raw, &n) == nil, k.Int64(n)
		case "FLOAT64":
			var f float64
			ok, v = json.Unmarshal(raw, &f) == nil, k.Float64(f)
		case "STRING":
			var s string
			ok, v = json.Unmarshal(raw, &s) == nil, k.String(s)
		case "BOOLSLICE":
			var b []bool
			ok, v = json.Unmarshal(raw, &b) == nil, k.BoolSlice(b)
		case "INT64SLICE":
			var n []int64
			ok, v = json.Unmarshal(raw, &n) == nil, k.Int64Slice(n)
		case "FLOAT64SLICE":
			var f []float64
			ok, v = json.Unmarshal(raw, &f) == nil, k.Float64Slice(f)
		case "STRINGSLICE":
			var s []string
			ok, v = json.Unmarshal(raw, &s) == nil, k.StringSlice(s)
		}
		if ok {
			out = append(out, v)
		}
	}
	return out
}

// FromSDK returns the spans of the SDK's spans (a test's recorder's).
func FromSDK(spans []sdktrace.ReadOnlySpan) []Span {
	out := make([]Span, 0, len(spans))
	for _, st := range tracetest.SpanStubsFromReadOnlySpans(spans) {
		s := Span{
			Name: st.Name, Context: st.SpanContext, Parent: st.Parent, Kind: st.SpanKind, Start: st.StartTime, End: st.EndTime,
			Attributes: st.Attributes, Status: st.Status.Code, StatusDescription: st.Status.Description, Scope: st.InstrumentationScope.Name,
		}
		if st.Resource != nil {
			s.Resource = st.Resource.Attributes()
		}
		for _, e := range st.Events {
			s.Events = append(s.Events, Event{Name: e.Name, Time: e.Time, Attributes: e.Attributes})
		}
		for _, l := range st.Links {
			s.Links = append(s.Links, l.SpanContext)
		}
		out = append(out, s)
	}
	return out
}

// SDK returns spans as the SDK's read-only spans, for the checks that take
// those (oteltest.Orphans, oteltest.Reachable).
func SDK(spans []Span) []sdktrace.ReadOnlySpan {
	out := make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for _, s := range spans {
		st := tracetest.SpanStub{
			Name: s.Name, SpanContext: s.Context, Parent: s.Parent, SpanKind: s.Kind, StartTime: s.Start, EndTime: s.End,
			Attributes: s.Attributes, Status: sdktrace.Status{Code: s.Status, Description: s.StatusDescription},
			Resource: resource.NewSchemaless(s.Resource...), InstrumentationScope: instrumentation.Scope{Name: s.Scope},
		}
		for _, e := range s.Events {
			st.Events = append(st.Events, sdktrace.Event{Name: e.Name, Time: e.Time, Attributes: e.Attributes})
		}
		for _, l := range s.Links {
			st.Links = append(st.Links, sdktrace.Link{SpanContext: l})
		}
		out = append(out, st.Snapshot())
	}
	return out
}
