package sqlite

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// eventRow is one row of the columns in eventColumns, as the two kinds of
// connection give it: the event readers' (stmtRow) and database/sql's, for
// dead letters (valuesRow). decodeEvent reads both the same way.
type eventRow interface {
	// integer, text and blob return column i, and false when it holds
	// another type. blob copies into dst when it fits.
	integer(i int) (int64, bool)
	text(i int) (string, bool)
	blob(i int, dst []byte) ([]byte, bool)
	// optionalText is text that may be NULL, as "": false only for
	// another type. (text, then null when it fails, read a NULL's type
	// twice: four column calls into SQLite a row, most metadata being
	// NULL.)
	optionalText(i int) (string, bool)
	// null reports a NULL in column i.
	null(i int) bool
	// describe names what column i holds, for errors.
	describe(i int) string
}

// decodeEvent checks every column rather than trusting the schema: a row
// written by another program must give an error that says where, not a
// panic or a wrong event.
func decodeEvent(r eventRow) (eventstore.Event, error) {
	var e eventstore.Event
	err := decodeEventInto(r, &e, nil)
	return e, err
}

// decodeEventInto is decodeEvent writing into *e, which the caller has
// zeroed, so that a page decodes straight into its slice rather than
// through a copy on the heap. extras, when not nil, remembers the last
// Metadata.Extra decoded: the events of a page mostly repeat their
// metadata, and a copy of a small map costs much less than decoding JSON.
func decodeEventInto(r eventRow, e *eventstore.Event, extras *extraCache) error {
	pos, ok := r.integer(0)
	if !ok || pos <= 0 {
		return &CorruptError{Field: "position", Reason: "is " + r.describe(0)}
	}
	e.Position = eventstore.Position{Major: uint64(pos)}
	bad := func(field, reason string) error {
		return &CorruptError{Stream: e.StreamID, Version: e.Version, Position: uint64(pos), Field: field, Reason: reason}
	}
	if e.StreamID, ok = r.text(1); !ok {
		return bad("stream", "is "+r.describe(1)+", not text")
	}
	version, ok := r.integer(2)
	if !ok || version < 0 {
		return bad("version", "is "+r.describe(2)+", not a version")
	}
	e.Version = uint64(version)
	id, ok := r.blob(3, e.ID[:0])
	if !ok || len(id) != len(e.ID) {
		return bad("id", "is "+r.describe(3)+", not a 16-byte UUID")
	}
	e.ID = uuid.UUID(id)
	if e.Type, ok = r.text(4); !ok {
		return bad("type", "is "+r.describe(4)+", not text")
	}
	sv, ok := r.integer(5)
	if !ok || sv < 0 || sv > math.MaxUint32 {
		return bad("schema_version", "is "+r.describe(5)+", not a schema version")
	}
	e.SchemaVersion = uint32(sv)
	if e.Data, ok = r.blob(6, nil); !ok && !r.null(6) {
		return bad("data", "is "+r.describe(6)+", not a blob")
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	if e.Metadata.CorrelationID, ok = r.optionalText(7); !ok {
		return bad("correlation_id", "is "+r.describe(7)+", not text")
	}
	if e.Metadata.CausationID, ok = r.optionalText(8); !ok {
		return bad("causation_id", "is "+r.describe(8)+", not text")
	}
	if e.Metadata.CommandID, ok = r.optionalText(9); !ok {
		return bad("command_id", "is "+r.describe(9)+", not text")
	}
	if extra, ok := r.text(10); ok {
		var err error
		if e.Metadata.Extra, err = extras.decode(extra); err != nil {
			return bad("extra", "is not a JSON object of strings: "+err.Error())
		}
	} else if !r.null(10) {
		return bad("extra", "is "+r.describe(10)+", not JSON text")
	}
	at, ok := r.integer(11)
	if !ok {
		return bad("recorded_at", "is "+r.describe(11)+", not Unix nanoseconds")
	}
	e.RecordedAt = time.Unix(0, at).UTC()
	return nil
}

// extraCache holds the last Metadata.Extra decoded, and its JSON.
type extraCache struct {
	text  string
	extra map[string]string
}

// decode decodes the JSON of Metadata.Extra, into a map of the caller's
// own. A nil cache decodes every time.
func (c *extraCache) decode(text string) (map[string]string, error) {
	if c != nil && c.extra != nil && text == c.text {
		return maps.Clone(c.extra), nil
	}
	extra, err := storekit.DecodeExtraJSON([]byte(text))
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return nil, nil
	}
	if c != nil {
		c.text, c.extra = text, maps.Clone(extra)
	}
	return extra, nil
}

// valuesRow is a row scanned by database/sql into values: int64, float64,
// string, []byte or nil.
type valuesRow []any

func (r valuesRow) integer(i int) (int64, bool) { v, ok := r[i].(int64); return v, ok }
func (r valuesRow) text(i int) (string, bool)   { v, ok := r[i].(string); return v, ok }
func (r valuesRow) null(i int) bool             { return r[i] == nil }

func (r valuesRow) optionalText(i int) (string, bool) {
	v, ok := r[i].(string)
	return v, ok || r[i] == nil
}

func (r valuesRow) blob(i int, dst []byte) ([]byte, bool) {
	v, ok := r[i].([]byte)
	if ok && cap(dst) >= len(v) {
		v = append(dst[:0], v...)
	}
	return v, ok
}

func (r valuesRow) describe(i int) string {
	switch v := r[i].(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("a blob of %d bytes", len(v))
	case string:
		return fmt.Sprintf("text of %d bytes", len(v))
	default:
		return fmt.Sprintf("%v", v)
	}
}
