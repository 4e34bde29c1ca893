package waterfall

import (
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// streamKey is the attribute Cairn's spans name a stream with.
const streamKey = attribute.Key("cairn.stream")

// Roots returns the spans that start a picture: the outermost dispatch
// spans (a "dispatch ..." span with no parent: a command sent from
// outside, not by a saga's outbox) for which match reports true, earliest
// first.
func Roots(spans []Span, match func(Span) bool) []Span {
	var out []Span
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "dispatch ") && !s.Parent.IsValid() && match(s) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return out
}

// OnStream matches the spans whose cairn.stream is stream.
func OnStream(stream string) func(Span) bool {
	return func(s Span) bool {
		v, ok := s.Attr(streamKey)
		return ok && v.AsString() == stream
	}
}

// OfAggregate matches the spans whose cairn.stream is the stream of an
// aggregate called id, of any type ("<type>-<id>", as Cairn names them):
// every command from outside about one order, whatever its aggregate.
func OfAggregate(id string) func(Span) bool {
	return func(s Span) bool {
		v, ok := s.Attr(streamKey)
		return ok && id != "" && strings.HasSuffix(v.AsString(), "-"+id)
	}
}

// commandIDKey is the attribute Cairn's dispatch spans name their
// command's ID with.
const commandIDKey = attribute.Key("cairn.command_id")

// SameCommand returns the dispatch spans of s's command other than s (a
// dispatch's cairn.command_id names it): the command handled once, and
// each time it was delivered again and absorbed as a duplicate.
func SameCommand(spans []Span, s Span) []Span {
	id, ok := commandOf(s)
	if !ok {
		return nil
	}
	var out []Span
	for _, o := range spans {
		if oid, ok := commandOf(o); ok && oid == id && o.ID() != s.ID() {
			out = append(out, o)
		}
	}
	return out
}

func commandOf(s Span) (string, bool) {
	if !strings.HasPrefix(s.Name, "dispatch ") {
		return "", false
	}
	v, ok := s.Attr(commandIDKey)
	return v.AsString(), ok && v.AsString() != ""
}

// graph indexes spans by ID, by parent, by the spans they link to, and
// dispatches by command ID.
type graph struct {
	byID     map[trace.SpanID]Span
	children map[trace.SpanID][]trace.SpanID
	linkers  map[trace.SpanID][]trace.SpanID // span -> the spans that link to it
	commands map[string][]trace.SpanID       // command ID -> its dispatches
}

func newGraph(spans []Span) *graph {
	g := &graph{byID: make(map[trace.SpanID]Span, len(spans)), children: map[trace.SpanID][]trace.SpanID{},
		linkers: map[trace.SpanID][]trace.SpanID{}, commands: map[string][]trace.SpanID{}}
	for _, s := range Dedupe(spans) {
		id := s.ID()
		g.byID[id] = s
		if s.Parent.IsValid() {
			g.children[s.Parent.SpanID()] = append(g.children[s.Parent.SpanID()], id)
		}
		for _, l := range s.Links {
			g.linkers[l.SpanID()] = append(g.linkers[l.SpanID()], id)
		}
		if c, ok := commandOf(s); ok {
			g.commands[c] = append(g.commands[c], id)
		}
	}
	return g
}

// Picture returns what the spans roots caused, across traces and
// processes, with the spans that contain them, ordered by start:
//
//   - a span's children, unless the span links to several contexts (a
//     batch of many messages): its children then belong to the picture only
//     through links of their own, since the batch's other messages are other
//     pictures';
//   - the spans that link to a span of the picture (a consumer's batch and
//     handler spans link to the append that stored their events; an outbox
//     send links to the step that recorded its command; a deadline to the
//     step that scheduled it);
//   - the other dispatches of a dispatch's command (its cairn.command_id):
//     a command delivered again and absorbed as a duplicate joins the
//     dispatch that handled it, where its effect is (after a crash, the
//     send that made that dispatch may never have ended, and so never
//     reported its link);
//   - the ancestors of all these, shown for context but not followed into
//     their other children.
//
// Following every edge both ways instead (see [Connected]) joins every
// picture whose messages shared a batch.
func Picture(spans []Span, roots ...trace.SpanID) []Span {
	g := newGraph(spans)
	in := g.walk(roots, func(id trace.SpanID, add func(trace.SpanID)) {
		if len(g.byID[id].Links) <= 1 {
			for _, c := range g.children[id] {
				add(c)
			}
		}
		for _, l := range g.linkers[id] {
			add(l)
		}
		if c, ok := commandOf(g.byID[id]); ok {
			for _, d := range g.commands[c] {
				add(d)
			}
		}
	})
	// The ancestors, for context.
	for id := range in {
		for p := g.byID[id].Parent; p.IsValid(); {
			s, ok := g.byID[p.SpanID()]
			if !ok || in[p.SpanID()] {
				break
			}
			in[p.SpanID()] = true
			p = s.Parent
		}
	}
	return g.ordered(in)
}

// Connected returns every span connected to roots by parents, children and
// links, in either direction, ordered by start (oteltest.Reachable over
// these spans).
func Connected(spans []Span, roots ...trace.SpanID) []Span {
	g := newGraph(spans)
	return g.ordered(g.walk(roots, func(id trace.SpanID, add func(trace.SpanID)) {
		s := g.byID[id]
		add(s.Parent.SpanID())
		for _, l := range s.Links {
			add(l.SpanID())
		}
		for _, c := range g.children[id] {
			add(c)
		}
		for _, l := range g.linkers[id] {
			add(l)
		}
	}))
}

// walk returns the spans reached from roots, breadth first: next calls
// add with the spans to go on to from each one reached. Spans not in the
// graph are not reached.
func (g *graph) walk(roots []trace.SpanID, next func(id trace.SpanID, add func(trace.SpanID))) map[trace.SpanID]bool {
	in := map[trace.SpanID]bool{}
	var queue []trace.SpanID
	add := func(id trace.SpanID) {
		if _, ok := g.byID[id]; ok && !in[id] {
			in[id] = true
			queue = append(queue, id)
		}
	}
	for _, r := range roots {
		add(r)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		next(id, add)
	}
	return in
}

func (g *graph) ordered(in map[trace.SpanID]bool) []Span {
	out := make([]Span, 0, len(in))
	for id := range in {
		out = append(out, g.byID[id])
	}
	slices.SortFunc(out, func(a, b Span) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		// A parent and the child it started at the same instant: the
		// parent first.
		if b.Parent.SpanID() == a.ID() {
			return -1
		}
		if a.Parent.SpanID() == b.ID() {
			return 1
		}
		return strings.Compare(a.ID().String(), b.ID().String())
	})
	return out
}

// Depths returns the depth of each span of picture in the parent tree
// within the picture: 0 for a span whose parent is not in it.
func Depths(picture []Span) map[trace.SpanID]int {
	byID := make(map[trace.SpanID]Span, len(picture))
	for _, s := range picture {
		byID[s.ID()] = s
	}
	depth := make(map[trace.SpanID]int, len(picture))
	var of func(s Span, guard int) int
	of = func(s Span, guard int) int {
		if d, ok := depth[s.ID()]; ok {
			return d
		}
		d := 0
		if p, ok := byID[s.Parent.SpanID()]; ok && s.Parent.IsValid() && guard < len(picture) {
			d = of(p, guard+1) + 1
		}
		depth[s.ID()] = d
		return d
	}
	for _, s := range picture {
		of(s, 0)
	}
	return depth
}
