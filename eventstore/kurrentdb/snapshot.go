package kurrentdb

import (
	"context"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.SnapshotStore = (*Store)(nil)

// snapshotRecord is the type of the records of a snapshot stream.
const snapshotRecord = "cairn.snapshot"

// snapshotFields is what a snapshot record keeps besides the state, which
// is its payload; the record's own time is the snapshot's RecordedAt.
type snapshotFields struct {
	Stream        string `json:"stream"`
	Version       uint64 `json:"version"`
	Type          string `json:"type"`
	SchemaVersion uint32 `json:"schema_version"`
}

// SaveSnapshot implements [storekit.SnapshotStore.SaveSnapshot]: one
// append, whatever the stream holds, to "cairn:snapshot-<stream>", whose
// $maxCount of 1 makes KurrentDB keep only the last. The first save of a
// stream in a process sets that $maxCount first (a write that does
// nothing when it is set already), as a save does not read the stream.
func (s *Store) SaveSnapshot(ctx context.Context, snap storekit.Snapshot) error {
	if err := storekit.ValidateSnapshot(snap); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	stream := stateStream(snapshotKind, snap.Stream)
	limited := s.caches().limited
	if _, ok := limited.Get(stream); !ok {
		if err := s.limitStream(ctx, stream, 1); err != nil {
			return err
		}
		limited.Put(stream, struct{}{})
	}
	_, err := s.appendRecords(ctx, stream, esdb.Any{}, record{typ: snapshotRecord, payload: snap.Data,
		fields: snapshotFields{Stream: snap.Stream, Version: snap.Version, Type: snap.Type, SchemaVersion: snap.SchemaVersion}})
	return err
}

// LoadSnapshot implements [storekit.SnapshotStore.LoadSnapshot]: one
// backward read of the snapshot stream, for its last record.
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (storekit.Snapshot, bool, error) {
	if err := storekit.ValidateStream(stream); err != nil {
		return storekit.Snapshot{}, false, err
	}
	if err := s.usable(ctx); err != nil {
		return storekit.Snapshot{}, false, err
	}
	name := stateStream(snapshotKind, stream)
	last, err := s.lastRecord(ctx, name)
	if err != nil || last == nil {
		return storekit.Snapshot{}, false, err
	}
	var f snapshotFields
	if err := decodeRecord(name, last, snapshotRecord, &f); err != nil {
		return storekit.Snapshot{}, false, err
	}
	snap := storekit.Snapshot{Stream: f.Stream, Version: f.Version, Type: f.Type, SchemaVersion: f.SchemaVersion,
		Data: last.Data, RecordedAt: last.CreatedDate.UTC()}
	if snap.Data == nil {
		snap.Data = []byte{} // an empty state is empty, not nil
	}
	if f.Stream != stream {
		return storekit.Snapshot{}, false, corruptRecord(name, last, fmt.Sprintf("is the snapshot of stream %q", f.Stream))
	}
	if err := storekit.ValidateSnapshot(snap); err != nil {
		return storekit.Snapshot{}, false, corruptRecord(name, last, err.Error())
	}
	return snap, true, nil
}
