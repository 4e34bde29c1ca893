package telemetry

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxLinks bounds the links one span takes from the events it covers: the
// SDK keeps 128 by default and drops the rest, so a batch links to the
// first 128 distinct contexts of its events.
const MaxLinks = 128

// w3c reads and writes the W3C traceparent and tracestate.
var w3c propagation.TraceContext

// MaxTraceState is the longest tracestate recorded, in bytes: what W3C
// asks every vendor to propagate at least. A longer one (a caller's, up to
// 32 entries) is left out, as the specification allows, so that a
// caller's tracing cannot crowd an event's own data.
const MaxTraceState = 512

// Inject records the trace context of the span in ctx in md, under
// [eventstore.TraceParentKey] and [eventstore.TraceStateKey], when that
// span is valid; it does nothing (and allocates nothing) otherwise. A
// context md already holds is kept: it is where the data came from.
func Inject(ctx context.Context, md *eventstore.Metadata) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if _, held := md.Extra[eventstore.TraceParentKey]; held {
		return
	}
	if md.Extra == nil {
		md.Extra = make(map[string]string, 2)
	}
	w3c.Inject(ctx, metadataCarrier(md.Extra))
	if len(md.Extra[eventstore.TraceStateKey]) > MaxTraceState {
		delete(md.Extra, eventstore.TraceStateKey)
	}
}

// Fit takes the trace context out of e again when it makes e larger than
// a store takes ([storekit.MaxEventSize]): tracing never makes an append
// fail that would succeed without it. The event then links nowhere.
func Fit(e *eventstore.EventData) {
	if _, held := e.Metadata.Extra[eventstore.TraceParentKey]; !held || storekit.EventSize(e) <= storekit.MaxEventSize {
		return
	}
	delete(e.Metadata.Extra, eventstore.TraceParentKey)
	delete(e.Metadata.Extra, eventstore.TraceStateKey)
}

// SpanContextOf returns the remote span context md records, or an invalid
// one when it records none or one that does not parse.
func SpanContextOf(md eventstore.Metadata) trace.SpanContext {
	if md.Extra[eventstore.TraceParentKey] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), metadataCarrier(md.Extra)))
}

// LinkTo returns a link to the context md records, and false when it
// records none.
func LinkTo(md eventstore.Metadata) (trace.Link, bool) {
	sc := SpanContextOf(md)
	return trace.Link{SpanContext: sc}, sc.IsValid()
}

// LinksTo returns links to the distinct contexts that events record, at
// most [MaxLinks], in the events' order.
func LinksTo(events []eventstore.Event) []trace.Link {
	var links []trace.Link
	for i := range events {
		links = AddLink(links, events[i].Metadata)
	}
	return links
}

// AddLink returns links with a link to the context md records added, unless
// md records none, links already holds it, or holds [MaxLinks] already. It
// allocates nothing for metadata that records no context.
func AddLink(links []trace.Link, md eventstore.Metadata) []trace.Link {
	if len(links) >= MaxLinks {
		return links
	}
	sc := SpanContextOf(md)
	if !sc.IsValid() {
		return links
	}
	for _, l := range links {
		if l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID() {
			return links
		}
	}
	return append(links, trace.Link{SpanContext: sc})
}

// metadataCarrier maps the W3C header names onto Cairn's reserved metadata
// keys.
type metadataCarrier map[string]string

func carrierKey(k string) string {
	switch k {
	case "traceparent":
		return eventstore.TraceParentKey
	case "tracestate":
		return eventstore.TraceStateKey
	}
	return ""
}

func (c metadataCarrier) Get(k string) string {
	if key := carrierKey(k); key != "" {
		return c[key]
	}
	return ""
}

func (c metadataCarrier) Set(k, v string) {
	if key := carrierKey(k); key != "" {
		c[key] = v
	}
}

func (c metadataCarrier) Keys() []string {
	var keys []string
	for _, k := range []string{"traceparent", "tracestate"} {
		if _, ok := c[carrierKey(k)]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}
