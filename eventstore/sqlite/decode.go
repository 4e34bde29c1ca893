package sqlite

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
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
	pos, ok := r.integer(0)
	if !ok || pos <= 0 {
		return e, &CorruptError{Field: "position", Reason: "is " + r.describe(0)}
	}
	e.Position = eventstore.Position{Major: uint64(pos)}
	bad := func(field, reason string) error {
		return &CorruptError{Stream: e.StreamID, Version: e.Version, Position: uint64(pos), Field: field, Reason: reason}
	}
	if e.StreamID, ok = r.text(1); !ok {
		return e, bad("stream", "is "+r.describe(1)+", not text")
	}
	version, ok := r.integer(2)
	if !ok || version < 0 {
		return e, bad("version", "is "+r.describe(2)+", not a version")
	}
	e.Version = uint64(version)
	id, ok := r.blob(3, e.ID[:0])
	if !ok || len(id) != len(e.ID) {
		return e, bad("id", "is "+r.describe(3)+", not a 16-byte UUID")
	}
	e.ID = uuid.UUID(id)
	if e.Type, ok = r.text(4); !ok {
		return e, bad("type", "is "+r.describe(4)+", not text")
	}
	sv, ok := r.integer(5)
	if !ok || sv < 0 || sv > math.MaxUint32 {
		return e, bad("schema_version", "is "+r.describe(5)+", not a schema version")
	}
	e.SchemaVersion = uint32(sv)
	if e.Data, ok = r.blob(6, nil); !ok && !r.null(6) {
		return e, bad("data", "is "+r.describe(6)+", not a blob")
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	for i, dst := range []*string{&e.Metadata.CorrelationID, &e.Metadata.CausationID, &e.Metadata.CommandID} {
		if *dst, ok = r.text(7 + i); !ok && !r.null(7+i) {
			return e, bad([]string{"correlation_id", "causation_id", "command_id"}[i], "is "+r.describe(7+i)+", not text")
		}
	}
	if extra, ok := r.text(10); ok {
		if err := json.Unmarshal([]byte(extra), &e.Metadata.Extra); err != nil {
			return e, bad("extra", "is not a JSON object of strings: "+err.Error())
		}
		if len(e.Metadata.Extra) == 0 {
			e.Metadata.Extra = nil
		}
	} else if !r.null(10) {
		return e, bad("extra", "is "+r.describe(10)+", not JSON text")
	}
	at, ok := r.integer(11)
	if !ok {
		return e, bad("recorded_at", "is "+r.describe(11)+", not Unix nanoseconds")
	}
	e.RecordedAt = time.Unix(0, at).UTC()
	return e, nil
}

// valuesRow is a row scanned by database/sql into values: int64, float64,
// string, []byte or nil.
type valuesRow []any

func (r valuesRow) integer(i int) (int64, bool) { v, ok := r[i].(int64); return v, ok }
func (r valuesRow) text(i int) (string, bool)   { v, ok := r[i].(string); return v, ok }
func (r valuesRow) null(i int) bool             { return r[i] == nil }

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
