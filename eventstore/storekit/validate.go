package storekit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/internal/clip"
)

// Limits every store enforces, so that an application can move between
// stores without its appends starting to fail. KurrentDB's default maximum
// append size is 1 MiB; the others follow it.
const (
	// MaxStreamLen is the longest stream name, in bytes.
	MaxStreamLen = names.MaxStreamLen
	// MaxTypeLen is the longest event type name, in bytes.
	MaxTypeLen = names.MaxTypeLen
	// MaxEventSize is the largest event, in bytes of data plus metadata.
	MaxEventSize = 1 << 20
	// MaxAppendEvents is the largest number of events in one append.
	MaxAppendEvents = 10_000
	// MaxFilterTypes is the most event types one filter may list.
	MaxFilterTypes = names.MaxFilterTypes
	// MaxFilterPrefixes is the most stream prefixes one filter may list.
	MaxFilterPrefixes = names.MaxFilterPrefixes
	// MaxCommandIDLen is the longest command ID ([eventstore.Metadata.CommandID]), in
	// bytes. PostgreSQL indexes a stream's command IDs, and a B-tree entry
	// of (stream, command ID) must stay under its 2,704-byte limit for the
	// longest stream name; a queue's message ID is far shorter.
	MaxCommandIDLen = 1024
)

// PrepareAppend checks an append's arguments and returns the events to
// write: copies that share no memory with the caller's, with a new UUIDv7
// for every zero ID. Every store calls it first, with the append's ctx, so
// that all reject the same input with the same [*eventstore.InvalidArgumentError]:
// among it, a saga stream ([ReservedStreamPrefix]) or a type or metadata
// key with [ReservedTypePrefix], which only Cairn's own writers append.
func PrepareAppend(ctx context.Context, stream string, events []eventstore.EventData) ([]eventstore.EventData, error) {
	return PrepareAppendWith(ctx, stream, events, PrepareOptions{})
}

// PrepareOptions fit [PrepareAppendWith] to a store that keeps what it
// appends in memory of its own. The zero value is [PrepareAppend].
type PrepareOptions struct {
	// Into is memory for the checked events, used when it is large
	// enough: a buffer on the store's stack spares an allocation per
	// append, for a store that only reads them before Append returns.
	Into []eventstore.EventData
	// Now is the clock reading at which the IDs are made
	// ([eventstore.NewEventIDAt]): a store that records the events at a
	// reading it took before calling (as [eventstore.Event.RecordedAt])
	// spares reading the clock again. Zero reads the clock, once, when an
	// ID is to be made.
	Now time.Time
	// SharedData leaves each event's Data the caller's memory instead of
	// a copy, for a store that copies it itself before Append returns:
	// the memory store copies payloads into large blocks of its own, so
	// that the collector has fewer objects to mark than one per append.
	SharedData bool
}

// PrepareAppendWith is [PrepareAppend] as opts say (see [PrepareOptions]).
func PrepareAppendWith(ctx context.Context, stream string, events []eventstore.EventData, opts PrepareOptions) ([]eventstore.EventData, error) {
	now := opts.Now
	if err := ValidateStream(stream); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "events", Reason: "is empty: an append needs at least one event"}
	}
	if len(events) > MaxAppendEvents {
		return nil, &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "events",
			Reason: fmt.Sprintf("has %d events, more than the limit of %d", len(events), MaxAppendEvents)}
	}
	out := slices.Grow(opts.Into[:0], len(events))[:len(events)]
	// A short append looks for repeated IDs among the events before
	// each, as a map for so few costs more than it saves.
	var seen map[uuid.UUID]int
	if len(events) > seenScan {
		seen = make(map[uuid.UUID]int, len(events))
	}
	total := 0
	for i := range events {
		e := &out[i]
		*e = events[i]
		bad := func(field, reason string) error {
			return &eventstore.InvalidArgumentError{Stream: stream, Index: i, Field: field, Reason: reason}
		}
		if field, reason := eventDataProblem(e); reason != "" {
			return nil, bad(field, reason)
		}
		if e.ID == (uuid.UUID{}) {
			if now.IsZero() {
				now = time.Now()
			}
			e.ID = eventstore.NewEventIDAt(now)
		}
		if j, dup := repeated(out[:i], seen, e.ID); dup {
			return nil, bad("id", fmt.Sprintf("%s repeats the ID of event %d in the same append", e.ID, j))
		}
		if seen != nil {
			seen[e.ID] = i
		}
		total += len(e.Data)
	}
	// Once every event is valid, one array takes the copies of their data,
	// each capped at its length so that an append to one cannot reach the
	// next: one allocation per append rather than one per event.
	var buf []byte
	if !opts.SharedData {
		buf = make([]byte, 0, total)
	}
	for i := range out {
		e := &out[i]
		if !opts.SharedData {
			start := len(buf)
			buf = append(buf, e.Data...)
			e.Data = buf[start:len(buf):len(buf)]
		}
		if e.Metadata.Extra != nil {
			e.Metadata = e.Metadata.Clone() // without Extra, it is a copy already
		}
	}
	if err := checkReserved(ctx, stream, out); err != nil {
		return nil, err
	}
	return out, nil
}

// seenScan is the most events an append checks for repeated IDs without
// a map.
const seenScan = 16

// repeated returns the index of the event before that has ID id: in seen
// when it is not nil, else by comparing.
func repeated(before []eventstore.EventData, seen map[uuid.UUID]int, id uuid.UUID) (int, bool) {
	if seen != nil {
		j, ok := seen[id]
		return j, ok
	}
	for j := range before {
		if before[j].ID == id {
			return j, true
		}
	}
	return 0, false
}

// eventDataProblem says which field of an event to append (or of a dead
// letter's event) is wrong and why, or "" for the reason when none is:
// PrepareAppend and CheckDeadLetter apply the one rule. Metadata is checked
// in a fixed order (correlation ID, causation ID, command ID, then Extra by
// sorted key), so that one input always gets one message.
func eventDataProblem(e *eventstore.EventData) (field, reason string) {
	if reason := names.TypeProblem(e.Type); reason != "" {
		return "type", reason
	}
	if e.Data == nil {
		return "data", "is nil: an event without payload has empty, non-nil data"
	}
	if field, reason := metadataProblem(&e.Metadata); reason != "" {
		return field, reason
	}
	if size := EventSize(e); size > MaxEventSize {
		return "data", fmt.Sprintf("with metadata is %d bytes, more than the limit of %d", size, MaxEventSize)
	}
	return "", ""
}

// ValidateMetadata checks an event's metadata as [PrepareAppend] does, so
// that a caller (the command bus) can refuse a message before it decides:
// the correlation, causation and command IDs, then the Extra keys in sorted
// order, each valid UTF-8 without NUL bytes (and keys printable and not
// empty), and a command ID of at most [MaxCommandIDLen] bytes. The error's
// Field is "correlation ID", "causation ID", "command ID" or "metadata".
func ValidateMetadata(md eventstore.Metadata) error {
	if field, reason := metadataProblem(&md); reason != "" {
		return &eventstore.InvalidArgumentError{Index: -1, Field: field, Reason: reason}
	}
	return nil
}

// metadataProblem is the metadata part of eventDataProblem, in its fixed
// order.
func metadataProblem(md *eventstore.Metadata) (field, reason string) {
	notText := func(v string) string { return fmt.Sprintf("%s is not valid UTF-8 without NUL bytes", clip.Quote(v)) }
	switch {
	case !names.StorableText(md.CorrelationID):
		return "correlation ID", notText(md.CorrelationID)
	case !names.StorableText(md.CausationID):
		return "causation ID", notText(md.CausationID)
	case !names.StorableText(md.CommandID):
		return "command ID", notText(md.CommandID)
	}
	if len(md.CommandID) > MaxCommandIDLen {
		return "command ID", fmt.Sprintf("is %d bytes long, more than the limit of %d", len(md.CommandID), MaxCommandIDLen)
	}
	if len(md.Extra) == 0 {
		return "", "" // most metadata has none: ranging over nil zeroes an iterator
	}
	// The problem of the least key that has one: what checking the keys
	// in sorted order finds first, without sorting them.
	least, problem := "", ""
	for k, v := range md.Extra {
		if problem != "" && k >= least {
			continue
		}
		if p := extraProblem(k, v); p != "" {
			least, problem = k, p
		}
	}
	if problem != "" {
		return "metadata", problem
	}
	return "", ""
}

// extraProblem says what is wrong with one key and value of
// [eventstore.Metadata.Extra], or "".
func extraProblem(k, v string) string {
	switch {
	case k == "":
		return "has an empty key"
	case !names.Printable(k):
		return fmt.Sprintf("key %s is not printable UTF-8", clip.Quote(k))
	case !names.StorableText(v):
		return fmt.Sprintf("value of key %s is not valid UTF-8 without NUL bytes", clip.Quote(k))
	}
	return ""
}

// EventSize is what e counts against [MaxEventSize] (and a page against
// [MaxPageBytes]): its data and metadata, in bytes.
func EventSize(e *eventstore.EventData) int {
	md := &e.Metadata
	size := len(e.Data) + len(md.CorrelationID) + len(md.CausationID) + len(md.CommandID)
	if len(md.Extra) == 0 {
		return size // as in metadataProblem
	}
	for k, v := range md.Extra {
		size += len(k) + len(v)
	}
	return size
}

// ValidateStream checks a stream name: not empty, at most [MaxStreamLen]
// bytes of printable UTF-8, and not starting with "$", which KurrentDB
// reserves for its own streams.
func ValidateStream(stream string) error {
	if reason := names.StreamProblem(stream); reason != "" {
		return &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "stream name", Reason: reason}
	}
	return nil
}

// ValidateType checks an event type name as [eventstore.Store.Append] takes it: not
// empty, at most [MaxTypeLen] bytes of printable UTF-8. The codec checks
// registered names, and upcasters' names, with it, so that every name it
// accepts can be stored; snapshots' types follow the same rule.
func ValidateType(typ string) error {
	if reason := names.TypeProblem(typ); reason != "" {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "type", Reason: reason}
	}
	return nil
}
