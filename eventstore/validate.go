package eventstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits every store enforces, so that an application can move between
// stores without its appends starting to fail. KurrentDB's default maximum
// append size is 1 MiB; the others follow it.
const (
	// MaxStreamLen is the longest stream name, in bytes.
	MaxStreamLen = 512
	// MaxTypeLen is the longest event type name, in bytes.
	MaxTypeLen = 256
	// MaxEventSize is the largest event, in bytes of data plus metadata.
	MaxEventSize = 1 << 20
	// MaxAppendEvents is the largest number of events in one append.
	MaxAppendEvents = 10_000
)

// PrepareAppend checks an append's arguments and returns the events to
// write: copies that share no memory with the caller's, with a new UUIDv7
// for every zero ID. Every store calls it first, so that all reject the same
// input with the same [*InvalidArgumentError].
func PrepareAppend(stream string, events []EventData) ([]EventData, error) {
	if err := ValidateStream(stream); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, &InvalidArgumentError{Stream: stream, Index: -1, Field: "events", Reason: "is empty: an append needs at least one event"}
	}
	if len(events) > MaxAppendEvents {
		return nil, &InvalidArgumentError{Stream: stream, Index: -1, Field: "events",
			Reason: fmt.Sprintf("has %d events, more than the limit of %d", len(events), MaxAppendEvents)}
	}
	out := make([]EventData, len(events))
	seen := make(map[uuid.UUID]int, len(events))
	for i, e := range events {
		bad := func(field, reason string) error {
			return &InvalidArgumentError{Stream: stream, Index: i, Field: field, Reason: reason}
		}
		if reason := typeNameProblem(e.Type); reason != "" {
			return nil, bad("type", reason)
		}
		if e.Data == nil {
			return nil, bad("data", "is nil: an event without payload has empty, non-nil data")
		}
		size := len(e.Data)
		for name, v := range map[string]string{
			"correlation ID": e.Metadata.CorrelationID,
			"causation ID":   e.Metadata.CausationID,
			"command ID":     e.Metadata.CommandID,
		} {
			if !storableText(v) {
				return nil, bad("metadata", fmt.Sprintf("%s %q is not valid UTF-8 without NUL bytes", name, v))
			}
			size += len(v)
		}
		for k, v := range e.Metadata.Extra {
			switch {
			case k == "":
				return nil, bad("metadata", "has an empty key")
			case !utf8.ValidString(k) || strings.ContainsFunc(k, isControl):
				return nil, bad("metadata", fmt.Sprintf("key %q is not printable UTF-8", k))
			case !storableText(v):
				return nil, bad("metadata", fmt.Sprintf("value of key %q is not valid UTF-8 without NUL bytes", k))
			}
			size += len(k) + len(v)
		}
		if size > MaxEventSize {
			return nil, bad("data", fmt.Sprintf("with metadata is %d bytes, more than the limit of %d", size, MaxEventSize))
		}
		e = e.Clone()
		if e.ID == (uuid.UUID{}) {
			e.ID = NewEventID()
		}
		if j, dup := seen[e.ID]; dup {
			return nil, bad("id", fmt.Sprintf("%s repeats the ID of event %d in the same append", e.ID, j))
		}
		seen[e.ID] = i
		out[i] = e
	}
	return out, nil
}

// ValidateStream checks a stream name: not empty, at most [MaxStreamLen]
// bytes of printable UTF-8, and not starting with "$", which KurrentDB
// reserves for its own streams.
func ValidateStream(stream string) error {
	bad := func(reason string) error {
		return &InvalidArgumentError{Stream: stream, Index: -1, Field: "stream name", Reason: reason}
	}
	switch {
	case stream == "":
		return bad("is empty")
	case len(stream) > MaxStreamLen:
		return bad(fmt.Sprintf("is %d bytes long, more than the limit of %d", len(stream), MaxStreamLen))
	case !utf8.ValidString(stream) || strings.ContainsFunc(stream, isControl):
		return bad("is not printable UTF-8")
	case strings.HasPrefix(stream, "$"):
		return bad(`starts with "$", which is reserved for system streams`)
	}
	return nil
}

// typeNameProblem says what is wrong with an event type name, or "" when
// nothing is: appends and filters apply the one rule.
func typeNameProblem(typ string) string {
	switch {
	case typ == "":
		return "is empty"
	case len(typ) > MaxTypeLen:
		return fmt.Sprintf("is %d bytes long, more than the limit of %d", len(typ), MaxTypeLen)
	case !utf8.ValidString(typ) || strings.ContainsFunc(typ, isControl):
		return fmt.Sprintf("%q is not printable UTF-8", typ)
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// storableText reports whether s can be stored as text by every store:
// valid UTF-8 (SQLite's JSON, PostgreSQL's text and jsonb) and no NUL byte,
// which PostgreSQL's text cannot hold.
func storableText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
