package codec

import (
	"fmt"

	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/upcast"
)

// EncodeSnapshot serializes an aggregate's state, a registered value, as
// the snapshot of stream after the event at version, ready for an
// [storekit.SnapshotStore]. The state's type name and current schema
// version travel with it, so that a later deployment can upcast or
// discard it.
func (r *Registry) EncodeSnapshot(stream string, version uint64, state any) (storekit.Snapshot, error) {
	raw, err := r.EncodeValue(state)
	if err != nil {
		return storekit.Snapshot{}, fmt.Errorf("snapshot of stream %q at version %d: %w", stream, version, err)
	}
	return storekit.Snapshot{Stream: stream, Version: version, Type: raw.Type, SchemaVersion: raw.Version, Data: raw.Data}, nil
}

// DecodeSnapshot decodes a stored snapshot into the state type T, running
// the upcasters as [Registry.DecodeValue] does. Any error means the
// snapshot cannot be trusted: discard it and replay the stream. It is a
// [*DecodeError] with Snapshot set, naming the snapshot's stream and
// version; [ErrNoUpcastPath] says the state's layout has moved on with no
// way to bring this one forward, [ErrVersionTooNew] that a newer
// deployment wrote it.
func DecodeSnapshot[T any](r *Registry, s storekit.Snapshot) (T, error) {
	state, err := DecodeValueAs[T](r, upcast.Raw{Type: s.Type, Version: s.SchemaVersion, Data: s.Data})
	if de, ok := err.(*DecodeError); ok {
		de.Stream, de.Version, de.Snapshot = s.Stream, s.Version, true
	}
	return state, err
}
