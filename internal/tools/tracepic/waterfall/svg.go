package waterfall

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Options shape a drawing.
type Options struct {
	// Title is the first line of the drawing.
	Title string
	// Width is the drawing's width in pixels; 0 for 1280.
	Width int
	// ProcessKeys are the resource attributes that name a span's process,
	// the first one present winning; nil for reservation.process,
	// service.instance.id, service.name.
	ProcessKeys []attribute.Key
}

// Layout, in pixels.
const (
	rowHeight   = 18
	indent      = 12
	nameWidth   = 440
	procWidth   = 100
	durWidth    = 80
	headerRows  = 3
	charWidth   = 6.6 // of 11px monospace
	minBarWidth = 2
)

// kindColours colour the bars by span kind.
var kindColours = map[trace.SpanKind]string{
	trace.SpanKindInternal:    "#7f8fa6",
	trace.SpanKindServer:      "#c0392b",
	trace.SpanKindClient:      "#e67e22",
	trace.SpanKindProducer:    "#27ae60",
	trace.SpanKindConsumer:    "#8e44ad",
	trace.SpanKindUnspecified: "#95a5a6",
}

var kindOrder = []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindServer}

// outcomeKey is Cairn's attribute of what an operation did, shown beside
// the span's name.
const outcomeKey = attribute.Key("cairn.outcome")

// Draw writes picture (spans ordered by start, as [Picture] returns them)
// as an SVG waterfall: one row per span, indented by its depth, its bar on
// a time axis coloured by its kind, its process and duration beside it,
// and a dashed connector from each span a span links to.
func Draw(w io.Writer, picture []Span, opts Options) error {
	if opts.Width <= 0 {
		opts.Width = 1280
	}
	if opts.ProcessKeys == nil {
		opts.ProcessKeys = []attribute.Key{"reservation.process", "service.instance.id", "service.name"}
	}
	barX := float64(nameWidth + procWidth)
	barW := float64(opts.Width) - barX - durWidth - 10
	if barW < 100 {
		barW = 100
		opts.Width = int(barX + barW + durWidth + 10)
	}
	// The time axis, and where each process's spans stop: an unfinished
	// span (its process was killed) is drawn up to there.
	var t0, t1 time.Time
	last := map[string]time.Time{}
	for i, s := range picture {
		end := s.End
		if s.Unfinished() {
			end = s.Start
		}
		if i == 0 || s.Start.Before(t0) {
			t0 = s.Start
		}
		if i == 0 || end.After(t1) {
			t1 = end
		}
		if p := process(s, opts.ProcessKeys); end.After(last[p]) {
			last[p] = end
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Microsecond
	}
	x := func(t time.Time) float64 { return barX + barW*float64(t.Sub(t0))/float64(span) }
	legendY := (headerRows+len(picture))*rowHeight + 16
	height := legendY + 5*rowHeight

	b := &svg{}
	b.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="11">`+"\n",
		opts.Width, height, opts.Width, height)
	b.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	b.printf(`<text x="8" y="16" font-size="13" font-weight="bold">%s</text>`+"\n", esc(opts.Title))
	b.printf(`<text x="8" y="%d" fill="#555">span</text><text x="%d" y="%d" fill="#555">process</text><text x="%d" y="%d" fill="#555">duration</text>`+"\n",
		2*rowHeight+8, nameWidth, 2*rowHeight+8, opts.Width-durWidth, 2*rowHeight+8)
	axis(b, t0, span, x, 2*rowHeight+8, legendY-12)

	row := make(map[trace.SpanID]int, len(picture))
	for i, s := range picture {
		row[s.ID()] = i
	}
	rowY := func(i int) int { return (headerRows+i)*rowHeight + 4 }
	depths := Depths(picture)
	for i, s := range picture {
		y := rowY(i)
		if i%2 == 1 {
			b.printf(`<rect x="0" y="%d" width="%d" height="%d" fill="#f4f6f8"/>`+"\n", y, opts.Width, rowHeight)
		}
		d := depths[s.ID()]
		label := s.Name
		if v, ok := s.Attr(outcomeKey); ok {
			label += " · " + v.String()
		}
		room := int(float64(nameWidth-8-d*indent) / charWidth)
		b.printf(`<text x="%d" y="%d"><title>%s</title>%s</text>`+"\n", 8+d*indent, y+13, esc(tooltip(s)), esc(clip(label, room)))
		b.printf(`<text x="%d" y="%d" fill="#555">%s</text>`+"\n", nameWidth, y+13, esc(clip(process(s, opts.ProcessKeys), procWidth/7)))
		end := s.End
		if s.Unfinished() {
			end = last[process(s, opts.ProcessKeys)]
		}
		bx, bw := x(s.Start), x(end)-x(s.Start)
		if bw < minBarWidth {
			bw = minBarWidth
		}
		style := fmt.Sprintf(`fill="%s"`, colour(s.Kind))
		switch {
		case s.Unfinished():
			style = fmt.Sprintf(`fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="3,2"`, colour(s.Kind))
		case s.Status == codes.Error:
			style += ` stroke="#c0392b" stroke-width="2"`
		}
		b.printf(`<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" %s/>`+"\n", bx, y+3, bw, rowHeight-6, style)
		for _, e := range s.Events {
			ex := x(e.Time)
			b.printf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-width="1.5"><title>%s</title></line>`+"\n", ex, y+1, ex, y+rowHeight-1, esc(e.Name))
		}
		dur := duration(s.Duration())
		if s.Unfinished() {
			dur = "never ended"
		}
		b.printf(`<text x="%d" y="%d" fill="#333">%s</text>`+"\n", opts.Width-durWidth, y+13, dur)
	}
	// A dashed connector from each linked span (where it ended) to the
	// span that links to it (where it started).
	for i, s := range picture {
		for _, l := range s.Links {
			j, ok := row[l.SpanID()]
			if !ok {
				continue
			}
			t := picture[j]
			from := t.End
			if t.Unfinished() {
				from = t.Start
			}
			x1, y1 := x(from), float64(rowY(j)+rowHeight/2)
			x2, y2 := x(s.Start), float64(rowY(i)+rowHeight/2)
			mid := (y1 + y2) / 2
			b.printf(`<path d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="#34495e" stroke-opacity="0.6" stroke-dasharray="4,3"/>`+"\n",
				x1, y1, x1, mid, x2, mid, x2, y2)
			b.printf(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="#34495e"/>`+"\n", x2, y2)
		}
	}
	// A dotted connector from the first dispatch of a command to each
	// later one, absorbed as a duplicate.
	for i, s := range picture {
		c, ok := commandOf(s)
		if !ok {
			continue
		}
		for j := i + 1; j < len(picture); j++ {
			if d, ok := commandOf(picture[j]); ok && d == c {
				x1, y1 := x(s.Start), float64(rowY(i)+rowHeight/2)
				x2, y2 := x(picture[j].Start), float64(rowY(j)+rowHeight/2)
				// Bowed to the left of both starts, but not into the
				// process column.
				cx := max(min(x1, x2)-30, barX-6)
				b.printf(`<path d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="#16a085" stroke-width="1.5" stroke-dasharray="1,3"/>`+"\n",
					x1, y1, cx, y1, cx, y2, x2, y2)
			}
		}
	}
	legend(b, legendY)
	b.printf("</svg>\n")
	if b.err != nil {
		return b.err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type svg struct {
	strings.Builder
	err error
}

func (b *svg) printf(format string, args ...any) {
	if _, err := fmt.Fprintf(b, format, args...); err != nil && b.err == nil {
		b.err = err
	}
}

// axis draws the time axis: a tick and a faint line every round step.
func axis(b *svg, t0 time.Time, span time.Duration, x func(time.Time) float64, top, bottom int) {
	step := niceStep(span / 8)
	for d := time.Duration(0); d <= span; d += step {
		tx := x(t0.Add(d))
		b.printf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dde1e6"/>`+"\n", tx, top+4, tx, bottom)
		b.printf(`<text x="%.1f" y="%d" fill="#555" text-anchor="middle">%s</text>`+"\n", tx, top-4, duration(d))
	}
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten.
func niceStep(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Microsecond
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(d))))
	for _, m := range []float64{1, 2, 5, 10} {
		if float64(d) <= m*p {
			return time.Duration(m * p)
		}
	}
	return time.Duration(10 * p)
}

func legend(b *svg, y int) {
	x := 8
	for _, k := range kindOrder {
		b.printf(`<rect x="%d" y="%d" width="14" height="10" rx="2" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, y, colour(k), x+18, y+9, strings.ToUpper(k.String()))
		x += 18 + 8*len(k.String()) + 16
	}
	b.printf(`<path d="M%d,%d L%d,%d" stroke="#34495e" stroke-dasharray="4,3"/><circle cx="%d" cy="%d" r="2.5" fill="#34495e"/><text x="%d" y="%d">link (from the linked span's end to the span that links)</text>`+"\n",
		x, y+5, x+30, y+5, x+30, y+5, x+36, y+9)
	y += rowHeight
	b.printf(`<rect x="8" y="%d" width="14" height="10" rx="2" fill="#fff" stroke="#c0392b" stroke-width="2"/><text x="26" y="%d">error status</text>`+"\n", y, y+9)
	b.printf(`<line x1="140" y1="%d" x2="140" y2="%d" stroke="#000" stroke-width="1.5"/><text x="148" y="%d">span event (retry, dead_letter)</text>`+"\n", y-2, y+12, y+9)
	b.printf(`<rect x="400" y="%d" width="14" height="10" rx="2" fill="none" stroke="#7f8fa6" stroke-width="1.5" stroke-dasharray="3,2"/><text x="418" y="%d">never ended: its process was killed (drawn to its last span)</text>`+"\n", y, y+9)
	y += rowHeight
	b.printf(`<path d="M8,%d L38,%d" stroke="#16a085" stroke-width="1.5" stroke-dasharray="1,3"/><text x="44" y="%d">the same command dispatched again (by its ID), absorbed as a duplicate</text>`+"\n", y+5, y+5, y+9)
	y += rowHeight
	b.printf(`<text x="8" y="%d" fill="#555">rows by start time, indented under their parent; hover a name for its attributes</text>`+"\n", y+9)
}

func colour(k trace.SpanKind) string {
	if c, ok := kindColours[k]; ok {
		return c
	}
	return kindColours[trace.SpanKindUnspecified]
}

// process names the process of s: its first resource attribute of keys.
func process(s Span, keys []attribute.Key) string {
	for _, k := range keys {
		if v, ok := s.ResourceAttr(k); ok && v.String() != "" {
			return v.String()
		}
	}
	return "?"
}

// tooltip is what a span's name shows on hover: its attributes.
func tooltip(s Span) string {
	var b strings.Builder
	if s.Unfinished() {
		fmt.Fprintf(&b, "%s (%s, never ended: its process was killed; the attributes it started with)", s.Name, s.Kind)
	} else {
		fmt.Fprintf(&b, "%s (%s, %s)", s.Name, s.Kind, duration(s.Duration()))
	}
	for _, kv := range s.Attributes {
		fmt.Fprintf(&b, "\n%s = %s", kv.Key, kv.Value.String())
	}
	if s.Status == codes.Error {
		fmt.Fprintf(&b, "\nstatus: error %s", s.StatusDescription)
	}
	return b.String()
}

// duration writes d short, with three significant digits at most.
func duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d >= time.Second:
		return trim(fmt.Sprintf("%.2f", d.Seconds())) + "s"
	case d >= time.Millisecond:
		return trim(fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))) + "ms"
	case d >= time.Microsecond:
		return trim(fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond))) + "µs"
	}
	return fmt.Sprintf("%dns", d.Nanoseconds())
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if n < 2 {
		n = 2
	}
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func esc(s string) string { return html.EscapeString(s) }
