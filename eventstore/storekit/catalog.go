package storekit

import (
	"context"
	"iter"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// Catalog lists what a store holds, for the tools that look at a store
// from outside the service that writes it: the cairn command line (streams
// ls, projections ls, doctor) and the copy between stores (package
// eventstore/storecopy), which moves consumers' state as well as events.
// Every Cairn store is one; storetest.Run checks it (its Catalog part).
// Every method is safe for concurrent use.
//
// Listing is for operators, not for a hot path: a store may answer from
// an index (a SQL store's GROUP BY over its (stream, version) key), or,
// where it keeps no such index, by reading its log (KurrentDB), so that
// its cost grows with the store.
type Catalog interface {
	// Streams yields the streams whose names start with prefix and sort
	// after after (byte order; "" for the first), in name order, with
	// their last event's version and position. A prefix of "" lists every
	// stream, Cairn's own ("saga:" streams) included; a store's internal
	// streams that Store.ReadAll does not yield are never listed.
	Streams(ctx context.Context, prefix, after string) iter.Seq2[StreamInfo, error]

	// Consumers yields every consumer the store keeps something for (a
	// checkpoint, a lease or dead letters), in name order.
	Consumers(ctx context.Context) iter.Seq2[ConsumerInfo, error]

	// Snapshots yields the stored snapshots of the streams that sort
	// after after ("" for the first), in stream name order.
	Snapshots(ctx context.Context, after string) iter.Seq2[Snapshot, error]
}

// StreamInfo describes one stream in a [Catalog] listing.
type StreamInfo struct {
	// Name is the stream's name.
	Name string
	// LastVersion is the version of the stream's last event; the stream
	// holds LastVersion+1 events.
	LastVersion uint64
	// LastPosition is the global position of the stream's last event.
	LastPosition eventstore.Position
}

// ConsumerInfo is what a store keeps for one consumer, as a [Catalog]
// lists it.
type ConsumerInfo struct {
	// Name is the consumer's name.
	Name string
	// Checkpoint is its stored checkpoint; the zero Checkpoint when it has
	// none (HasCheckpoint false).
	Checkpoint    Checkpoint
	HasCheckpoint bool
	// CheckpointSaved is when the checkpoint was last saved, in UTC; zero
	// when the store does not keep it.
	CheckpointSaved time.Time
	// Lease is the consumer's lease as last acquired, renewed or released
	// (a released or lapsed lease has Expires in the past); HasLease is
	// false when it was never leased.
	Lease    Lease
	HasLease bool
	// DeadLetters counts its dead letters, and OldestDeadLetter is the
	// first failure of the oldest of them (zero when there are none).
	DeadLetters      int
	OldestDeadLetter time.Time
}

// Described is a store that says what it is, for the tools that look at a
// store from outside (cairn doctor names the store it checks). Cairn's
// stores implement it; a store that does not is named by its Go type.
type Described interface {
	// Kind names the kind of store ("sqlite", "postgres", "kurrentdb")
	// and the version of its schema that this build opened it at: opening
	// a SQL store migrates it to this build's version (or, read only,
	// refuses any other). It is 0 for a store that has no schema of
	// Cairn's to migrate (KurrentDB, whose streams are kept as the
	// server keeps any stream).
	Kind() (name string, schemaVersion int)
}
