// Command tracepic draws one picture of a trace as an SVG waterfall, from
// the span files OpenTelemetry's stdout exporter writes (one JSON span per
// line; the reservation example's -trace writes one file per process):
//
//	go run ./internal/tools/tracepic -id <order ID> -o picture.svg trace/*.jsonl
//	go run ./internal/tools/tracepic -list trace/*.jsonl
//
// The picture starts at the outermost dispatch spans of the commands sent
// from outside about one aggregate ID (-id) or one stream (-stream), or at
// one span (-span), and takes what they caused, across traces and
// processes: see waterfall.Picture. -connected takes every span joined to
// them by any parent, child or link instead.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cairn-es/cairn/internal/tools/tracepic/waterfall"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tracepic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "start at the outermost dispatch spans whose cairn.stream is <type>-<id>: every command sent from outside about this ID")
	stream := fs.String("stream", "", "start at the outermost dispatch spans of this stream")
	spanID := fs.String("span", "", "start at this span (16 hex digits)")
	pick := fs.Bool("pick", false, "start at the aggregate ID whose picture spans the most processes (then the most spans): the one that crossed a restart, if one did")
	first := fs.Bool("first", false, "start at the earliest of the matching dispatch spans only")
	connected := fs.Bool("connected", false, "take every span joined to the start by a parent, child or link, in either direction")
	list := fs.Bool("list", false, "list the aggregate IDs of the outermost dispatch spans, and draw nothing")
	out := fs.String("o", "", "write the SVG to this file (default: standard output)")
	title := fs.String("title", "", "the drawing's title (default: what it starts from)")
	width := fs.Int("width", 1280, "the drawing's width in pixels")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tracepic [flags] spans.jsonl...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	spans, skipped, err := waterfall.ReadFiles(fs.Args()...)
	if err != nil {
		fmt.Fprintln(stderr, "tracepic:", err)
		return 1
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "tracepic: skipped %d lines that are not spans (metrics, or the last line of a process killed mid-write)\n", skipped)
	}
	if *list {
		listRoots(stdout, spans)
		return 0
	}
	if *pick {
		if *id = pickID(spans); *id == "" {
			fmt.Fprintln(stderr, "tracepic: -pick: no outermost dispatch span names an aggregate")
			return 1
		}
		fmt.Fprintf(stderr, "tracepic: -pick: %s\n", *id)
	}
	var roots []trace.SpanID
	what := ""
	switch {
	case *spanID != "":
		sid, err := trace.SpanIDFromHex(*spanID)
		if err != nil {
			fmt.Fprintf(stderr, "tracepic: -span %q: %v\n", *spanID, err)
			return 2
		}
		roots, what = []trace.SpanID{sid}, "span "+*spanID
	case *id != "" || *stream != "":
		match, name := waterfall.OfAggregate(*id), *id
		if *stream != "" {
			match, name = waterfall.OnStream(*stream), *stream
		}
		found := waterfall.Roots(spans, match)
		if *first && len(found) > 1 {
			found = found[:1]
		}
		for _, s := range found {
			roots = append(roots, s.ID())
		}
		what = name
	default:
		fmt.Fprintln(stderr, "tracepic: say where to start: -id, -stream or -span (-list lists the IDs)")
		return 2
	}
	walk := waterfall.Picture
	if *connected {
		walk = waterfall.Connected
	}
	picture := walk(spans, roots...)
	if len(picture) == 0 {
		fmt.Fprintf(stderr, "tracepic: no span to start from for %s in %d spans\n", what, len(spans))
		return 1
	}
	if *title == "" {
		*title = fmt.Sprintf("%s: %d spans, %d traces, %d processes", what, len(picture), count(picture, traceOf), count(picture, processOf))
	}
	var svg bytes.Buffer
	if err := waterfall.Draw(&svg, picture, waterfall.Options{Title: *title, Width: *width}); err != nil {
		fmt.Fprintln(stderr, "tracepic:", err)
		return 1
	}
	if *out == "" {
		_, err = stdout.Write(svg.Bytes())
	} else {
		err = os.WriteFile(*out, svg.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tracepic:", err)
		return 1
	}
	if *out != "" {
		fmt.Fprintf(stderr, "tracepic: %s: %d spans, %d bytes\n", *out, len(picture), svg.Len())
	}
	return 0
}

// pickID returns the aggregate ID whose picture spans the most processes,
// then the most spans, then the first in order.
func pickID(spans []waterfall.Span) string {
	best, bestProcs, bestSpans := "", 0, 0
	for _, id := range rootIDs(spans) {
		var roots []trace.SpanID
		for _, r := range waterfall.Roots(spans, waterfall.OfAggregate(id)) {
			roots = append(roots, r.ID())
		}
		p := waterfall.Picture(spans, roots...)
		if procs := count(p, processOf); procs > bestProcs || procs == bestProcs && len(p) > bestSpans {
			best, bestProcs, bestSpans = id, procs, len(p)
		}
	}
	return best
}

// rootIDs returns the aggregate IDs that outermost dispatch spans name,
// in the order of their first.
func rootIDs(spans []waterfall.Span) []string {
	var ids []string
	for _, s := range waterfall.Roots(spans, func(waterfall.Span) bool { return true }) {
		if id := aggregateID(s); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func aggregateID(s waterfall.Span) string {
	v, ok := s.Attr("cairn.stream")
	if !ok {
		return ""
	}
	_, id, _ := strings.Cut(v.AsString(), "-")
	return id
}

// listRoots prints the aggregate IDs that outermost dispatch spans name,
// with how many commands each got, in the order of their first.
func listRoots(w io.Writer, spans []waterfall.Span) {
	counts := map[string]int{}
	var ids []string
	for _, s := range waterfall.Roots(spans, func(waterfall.Span) bool { return true }) {
		id := aggregateID(s)
		if id == "" {
			continue
		}
		if counts[id] == 0 {
			ids = append(ids, id)
		}
		counts[id]++
	}
	for _, id := range ids {
		fmt.Fprintf(w, "%s\t%d commands\n", id, counts[id])
	}
}

func traceOf(s waterfall.Span) string { return s.Context.TraceID().String() }

func processOf(s waterfall.Span) string {
	v, _ := s.ResourceAttr(attribute.Key("service.instance.id"))
	return v.String()
}

func count(spans []waterfall.Span, key func(waterfall.Span) string) int {
	var seen []string
	for _, s := range spans {
		if k := key(s); !slices.Contains(seen, k) {
			seen = append(seen, k)
		}
	}
	return len(seen)
}
