package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/tools/tracepic/waterfall"
)

// What the end-to-end trace test (trace_test.go) walks its spans with.

// traced is a traced run: its spans, merged, and their processes.
type traced struct {
	all []waterfall.Span
	// parent, killed and restarted are the spans of the test process, of
	// the sale process killed with SIGKILL, and of the one started after.
	parent, killed, restarted []waterfall.Span
	byID                      map[trace.SpanID]waterfall.Span
	children, linkers         map[trace.SpanID][]waterfall.Span
	proc                      map[trace.SpanID]string
}

func newTraced(parent, killed, restarted []waterfall.Span) *traced {
	tr := &traced{parent: parent, killed: killed, restarted: restarted, byID: map[trace.SpanID]waterfall.Span{},
		children: map[trace.SpanID][]waterfall.Span{}, linkers: map[trace.SpanID][]waterfall.Span{}, proc: map[trace.SpanID]string{}}
	for name, spans := range map[string][]waterfall.Span{"parent": parent, "sale #1": killed, "sale #2": restarted} {
		for _, s := range spans {
			tr.all = append(tr.all, s)
			tr.byID[s.ID()] = s
			tr.proc[s.ID()] = name
			if s.Parent.IsValid() {
				tr.children[s.Parent.SpanID()] = append(tr.children[s.Parent.SpanID()], s)
			}
			for _, l := range s.Links {
				tr.linkers[l.SpanID()] = append(tr.linkers[l.SpanID()], s)
			}
		}
	}
	return tr
}

// follow returns the spans along hops from root, and false when no path
// takes every hop. Where a hop has several spans (a step or send taken up
// again after the crash, a command redelivered), it tries the one that did
// the work (outcome handled or sent) first.
func (tr *traced) follow(root waterfall.Span, hops []hop) ([]waterfall.Span, bool) {
	if len(hops) == 0 {
		return []waterfall.Span{root}, true
	}
	h := hops[0]
	next := tr.children[root.ID()]
	if h.link {
		next = tr.linkers[root.ID()]
	}
	next = slices.DeleteFunc(slices.Clone(next), func(s waterfall.Span) bool { return s.Name != h.name || s.Kind != h.kind })
	slices.SortStableFunc(next, func(a, b waterfall.Span) int { return rank(a) - rank(b) })
	for _, n := range next {
		if rest, ok := tr.follow(n, hops[1:]); ok {
			return append([]waterfall.Span{root}, rest...), true
		}
		// A dispatch absorbed as a duplicate: the chain goes on from the
		// dispatch that handled its command, whose send the kill may have
		// cut before it reported its link.
		if !strings.HasPrefix(h.name, "dispatch ") || attr(n, "cairn.outcome") != "duplicate" {
			continue
		}
		for _, d := range waterfall.SameCommand(tr.all, n) {
			if attr(d, "cairn.outcome") != "handled" {
				continue
			}
			if rest, ok := tr.follow(d, hops[1:]); ok {
				return append([]waterfall.Span{root, n}, rest...), true
			}
		}
	}
	return nil, false
}

// underKill reports whether what led to s (its ancestors, and what they
// link to, not through a batch's many links) passes through a span of the
// killed process that never ended: one whose links and attributes, added
// after it started, were lost with the process.
func (tr *traced) underKill(s waterfall.Span) bool {
	seen := map[trace.SpanID]bool{s.ID(): true}
	queue := []waterfall.Span{s}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.Unfinished() && tr.proc[s.ID()] == "sale #1" {
			return true
		}
		up := []trace.SpanContext{s.Parent}
		if len(s.Links) == 1 {
			up = append(up, s.Links[0])
		}
		for _, u := range up {
			if p, ok := tr.byID[u.SpanID()]; ok && u.IsValid() && !seen[p.ID()] {
				seen[p.ID()] = true
				queue = append(queue, p)
			}
		}
	}
	return false
}

// ancestry writes s and its ancestors, with the spans they link to, for a
// failure's message.
func (tr *traced) ancestry(s waterfall.Span) string {
	out := ""
	for range 20 {
		out += fmt.Sprintf("\n  %s [%s %s unfinished=%v] links:", s.Name, tr.proc[s.ID()], attr(s, "cairn.outcome"), s.Unfinished())
		for _, l := range s.Links {
			if ls, ok := tr.byID[l.SpanID()]; ok {
				out += fmt.Sprintf(" %s [%s]", ls.Name, tr.proc[ls.ID()])
			} else {
				out += " (not recorded)"
			}
		}
		p, ok := tr.byID[s.Parent.SpanID()]
		if !s.Parent.IsValid() || !ok {
			break
		}
		s = p
	}
	return out
}

// describe writes what s caused (its children and the spans that link to
// it), for a failure's message.
func (tr *traced) describe(s waterfall.Span, depth int) string {
	out := "\n" + strings.Repeat("  ", depth) + s.Name + " [" + tr.proc[s.ID()] + " " + attr(s, "cairn.outcome") + "]"
	if depth > 30 {
		return out
	}
	for _, c := range tr.children[s.ID()] {
		out += tr.describe(c, depth+1)
	}
	for _, l := range tr.linkers[s.ID()] {
		if !strings.HasPrefix(l.Name, "process ") && !strings.HasPrefix(l.Name, "handle ") {
			out += "\n" + strings.Repeat("  ", depth+1) + "(link)" + tr.describe(l, depth+1)
		}
	}
	return out
}

func rank(s waterfall.Span) int {
	switch attr(s, "cairn.outcome") {
	case "handled", "sent", "":
		return 0
	}
	return 1
}

// sumInt64 sums the data points of the int64 counter called name whose
// attributes include attrs.
func sumInt64(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) int64 {
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != name || !ok {
				continue
			}
			for _, p := range d.DataPoints {
				if slices.ContainsFunc(attrs, func(kv attribute.KeyValue) bool { v, ok := p.Attributes.Value(kv.Key); return !ok || v != kv.Value }) {
					continue
				}
				sum += p.Value
			}
		}
	}
	return sum
}

func attr(s waterfall.Span, key string) string {
	v, ok := s.Attr(attribute.Key(key))
	if !ok {
		return ""
	}
	return v.String()
}

// storedContext returns the trace context the first event of stream
// records.
func storedContext(t *testing.T, ctx context.Context, store eventstore.Store, stream string, version uint64) trace.SpanContext {
	t.Helper()
	for ev, err := range store.ReadStream(ctx, stream, eventstore.Forward(version)) {
		require.NoError(t, err)
		return telemetry.SpanContextOf(ev.Metadata)
	}
	t.Fatalf("%s has no event %d", stream, version)
	return trace.SpanContext{}
}
