package upcast

import (
	"strconv"

	"github.com/cairn-es/cairn/eventstore"
)

// Raw is an event, or a snapshot, in serialized form: what an upcaster
// step reads and writes.
type Raw struct {
	// Type is the event type name, such as "order.placed".
	Type string
	// Version is the schema version of Type's data layout.
	Version uint32
	// Data is the serialized payload. Steps must not modify it in place:
	// it may share memory with the stored event. Return a new slice.
	Data []byte
	// Metadata travels with the event. A step may change it; a step that
	// returns a Raw with zero Metadata keeps the input's (see [Transform]).
	Metadata eventstore.Metadata
}

// Key returns the (type, version) pair that selects the step for r.
func (r Raw) Key() Key { return Key{Type: r.Type, Version: r.Version} }

// Key is a type name and schema version: what a step applies to, and
// where it leads.
type Key struct {
	Type    string
	Version uint32
}

// String returns the form used in error messages: `"order.placed" v2`.
func (k Key) String() string {
	return strconv.Quote(k.Type) + " v" + strconv.FormatUint(uint64(k.Version), 10)
}

// metadataIsZero reports whether m carries nothing, the sign that a step
// built its result from scratch and meant to keep the input's metadata.
func metadataIsZero(m eventstore.Metadata) bool {
	return m.CorrelationID == "" && m.CausationID == "" && m.CommandID == "" && m.Extra == nil
}
