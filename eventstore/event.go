package eventstore

import (
	"maps"
	"time"

	"github.com/google/uuid"
)

// EventData is an event to append.
type EventData struct {
	// ID identifies the event. Appending an ID that the stream already holds
	// at that place is a no-op, so a retried append never duplicates. The
	// zero UUID asks the store for a new time-ordered one (UUIDv7).
	ID uuid.UUID
	// Type is the stable event type name, such as "order.placed".
	Type string
	// SchemaVersion is the version of Type's data layout, for upcasting.
	SchemaVersion uint32
	// Data is the serialized event. It must not be nil; an event without a
	// payload has empty, non-nil Data.
	Data []byte
	// Metadata travels with the event.
	Metadata Metadata
}

// Metadata is what an event carries besides its data: where it came from
// and what it belongs to.
type Metadata struct {
	// CorrelationID ties together every message of one business flow.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is the ID of the message that caused this event.
	CausationID string `json:"causation_id,omitempty"`
	// CommandID is the ID of the command that produced this event; the
	// command bus uses it to absorb redelivered commands.
	CommandID string `json:"command_id,omitempty"`
	// Extra holds free key/value pairs. Keys starting with "cairn." are
	// Cairn's own, such as [TraceParentKey].
	Extra map[string]string `json:"extra,omitempty"`
}

// The keys under which Cairn records, in [Metadata.Extra], the W3C trace
// context (https://www.w3.org/TR/trace-context/) of the span that appended
// an event: the command bus's append, a saga's step, an outbox send. A
// consumer that handles the event links its span to that context, so one
// trace leads to the next across processes and restarts. They are written
// only while a span records, and, like every "cairn." key, only by Cairn:
// a store refuses them from other writers, so no input can forge where a
// trace came from. A repeated append writes nothing, so an event keeps the
// context of the append that stored it first.
const (
	// TraceParentKey holds the traceparent: version, trace ID, span ID and
	// flags, as in "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".
	TraceParentKey = "cairn.traceparent"
	// TraceStateKey holds the tracestate, when the span has one.
	TraceStateKey = "cairn.tracestate"
)

// Clone returns a copy of m that shares no memory with it.
func (m Metadata) Clone() Metadata {
	if len(m.Extra) == 0 {
		m.Extra = nil
	} else {
		m.Extra = maps.Clone(m.Extra)
	}
	return m
}

// Event is an event as recorded in a stream.
type Event struct {
	EventData
	// StreamID is the stream the event was appended to.
	StreamID string
	// Version is the event's place in its stream: 0, 1, 2, ...
	Version uint64
	// Position is the event's global position.
	Position Position
	// RecordedAt is when the store committed the event, in UTC.
	RecordedAt time.Time
}

// Clone returns a copy of e that shares no memory with it.
func (e EventData) Clone() EventData {
	e.Data = append(make([]byte, 0, len(e.Data)), e.Data...)
	e.Metadata = e.Metadata.Clone()
	return e
}
