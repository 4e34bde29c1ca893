package storekit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"
)

// Snapshot is the state of one aggregate after the event at Version of its
// stream, in serialized form. Snapshots are an optimization: a reader that
// cannot trust one (unknown type, schema version it cannot upcast, Version
// past the stream's end) discards it and replays the stream.
type Snapshot struct {
	// Stream is the stream whose events the state was built from.
	Stream string
	// Version is the version of the last event applied to the state.
	Version uint64
	// Type and SchemaVersion name the serialized state's layout, as
	// codec.Registry.EncodeValue returns them.
	Type          string
	SchemaVersion uint32
	// Data is the serialized state; it must not be nil.
	Data []byte
	// RecordedAt is when the store saved the snapshot, in UTC; the store
	// sets it.
	RecordedAt time.Time
}

// SnapshotStore keeps the latest snapshot of each stream. Every backend's
// store is one; storetest.Run checks it (its Snapshots part). Every method
// is safe for concurrent use.
type SnapshotStore interface {
	// SaveSnapshot stores s as the snapshot of s.Stream, replacing the one
	// stored before, whatever its version: the last save wins. Saving is
	// best-effort for callers (a lost snapshot costs a longer replay), so a
	// store need not make it durable before it returns. Malformed input
	// returns an [*eventstore.InvalidArgumentError] and stores nothing.
	SaveSnapshot(ctx context.Context, s Snapshot) error

	// LoadSnapshot returns the snapshot of stream and true, or false when
	// there is none. The returned Data shares no memory with the store.
	LoadSnapshot(ctx context.Context, stream string) (Snapshot, bool, error)
}

// ValidateSnapshot checks a snapshot to save: a valid stream name, a
// version that a stream can reach (below 2^63, as SQL stores keep
// versions), a type name as [eventstore.Store.Append] takes one (see [ValidateType]),
// non-nil data and a size within [MaxEventSize]. Every snapshot store calls
// it first, so that all reject the same input with the same
// [*eventstore.InvalidArgumentError].
func ValidateSnapshot(s Snapshot) error {
	if err := ValidateStream(s.Stream); err != nil {
		return err
	}
	bad := func(field, reason string) error {
		return &eventstore.InvalidArgumentError{Stream: s.Stream, Index: -1, Field: "snapshot " + field, Reason: reason}
	}
	if reason := names.TypeProblem(s.Type); reason != "" {
		return bad("type", reason)
	}
	switch {
	case s.Version > math.MaxInt64:
		return bad("version", fmt.Sprintf("is %d, above the largest stream version, 2^63-1", s.Version))
	case s.Data == nil:
		return bad("data", "is nil: an empty state has empty, non-nil data")
	case len(s.Data) > MaxEventSize:
		return bad("data", fmt.Sprintf("is %d bytes, more than the limit of %d", len(s.Data), MaxEventSize))
	}
	return nil
}
