package saga

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// MaxStepSize is the budget of one step record, in bytes of data and
// metadata: three quarters of the store's limit on an event
// ([storekit.MaxEventSize]), so that the record that parks a message
// (the last record, and a reference to that message) always fits. Stored
// events are kept by reference, so what counts is the state, the
// commands a step sends, the deliveries held and the rejection reasons:
// a handled step over the budget parks its message; an early delivery
// that would take a record over it is refused (see [Runner.Deliver]).
const MaxStepSize = storekit.MaxEventSize / 4 * 3

// maxReasonLen bounds the text of a rejection or a failure that a record
// keeps, and maxHeldReasonLen that of a rejection held behind a parked
// message, so that many of them fit in one record.
const (
	maxReasonLen     = 4 << 10
	maxHeldReasonLen = 1 << 10
)

// parkLimit bounds a record that parks a message: the last record (within
// MaxStepSize) and the parked message, within the store's limit.
const parkLimit = storekit.MaxEventSize - 4<<10

// encode encodes rec, the step of msg at version of instance in, checking
// it against [MaxStepSize] first. A handled delivery's payload, kept only
// so that the step can be replayed, is left out of a record that would
// not fit otherwise. A parking record is held to the store's limit
// instead (parkLimit): it is the last record plus the parked message, a
// reference unless it is a delivery, whose payload may not fit: then the
// delivery is refused, and its broker keeps it.
func (e *engine[S]) encode(in *instance[S], version uint64, msg *message, rec *record, parking bool) (eventstore.EventData, error) {
	md := eventstore.Metadata{CorrelationID: msg.md.CorrelationID, CausationID: msg.md.CausationID}
	if md.CorrelationID == "" && md.CausationID == "" && msg.event != nil {
		md = eventstore.Metadata{CorrelationID: msg.event.Metadata.CorrelationID, CausationID: msg.event.ID.String()}
	}
	for {
		data, err := encodeRecord(in.stream, version, msg.key(), rec, md)
		if err != nil {
			return eventstore.EventData{}, fmt.Errorf("saga %q, instance %q: encoding the step record: %w", e.t.name, in.id, err)
		}
		size := len(data.Data) + len(md.CorrelationID) + len(md.CausationID)
		limit := MaxStepSize
		if parking {
			limit = parkLimit
		}
		if size <= limit {
			return data, nil
		}
		if untraceDeadlines(rec) {
			continue // the deadlines' links give way first: tracing never changes what fits
		}
		if h := &rec.Handled.Message; h.Event != nil {
			h.Event, h.Metadata = nil, nil
			continue
		}
		return eventstore.EventData{}, &RecordSizeError{Saga: e.t.name, Instance: in.id, Stream: in.stream, Message: msg.String(),
			Size: size, Limit: limit, Parts: largestParts(rec)}
	}
}

// untraceDeadlines drops the trace context of rec's deadlines (the
// scheduling steps their firing links to), reporting whether there was
// any: a record that fits without them is stored as it would be with
// tracing off.
func untraceDeadlines(rec *record) bool {
	dropped := false
	for i := range rec.Deadlines {
		if rec.Deadlines[i].Trace != "" {
			rec.Deadlines[i].Trace, dropped = "", true
		}
	}
	return dropped
}

// largestParts names the parts of rec that take the most room.
func largestParts(rec *record) string {
	sizes := map[string]int{"state": len(rec.State.Data)}
	for _, part := range []struct {
		name string
		v    any
	}{{"commands", rec.Commands}, {"held", rec.Held}, {"deadlines", rec.Deadlines}, {"sources", rec.Sources}, {"settled", rec.Settled}} {
		if b, err := json.Marshal(part.v); err == nil {
			sizes[part.name] = len(b)
		}
	}
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return sizes[names[i]] > sizes[names[j]] })
	parts := make([]string, 0, 3)
	for _, name := range names[:3] {
		parts = append(parts, fmt.Sprintf("%s %d bytes", name, sizes[name]))
	}
	return strings.Join(parts, ", ")
}

// clipReason bounds a rejection's or a failure's text for a record.
func clipReason(s string) string { return clip(s, maxReasonLen) }

// clip cuts s to at most n bytes, at a rune's start, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// stale is the error of an operator's action on the message with key that
// the instance in no longer has as the operator saw it.
func (e *engine[S]) stale(in *instance[S], action, key string) error {
	now := ""
	if p := in.rec.Parked; p != nil {
		now = "parked " + p.Message.key()
	}
	return &StaleError{Saga: e.t.name, Instance: in.id, Action: action, Want: key, Now: now}
}
