package eventstore

import (
	"context"
	"iter"
	"math"
)

// Store is an event store. Every method is safe for concurrent use.
type Store interface {
	// Append atomically appends events to the end of stream, when the stream
	// is in the expected state: all events are written, or none.
	//
	// A mismatch returns a [*WrongVersionError]. Events with a zero ID get a
	// new UUIDv7. When the stream already holds the same event IDs, in the
	// same order, at the place the append would write them, Append succeeds,
	// writes nothing and returns the earlier result with Duplicate set; when
	// it holds only some of them, or at another place, it returns an
	// [*EventIDConflictError]. Malformed input returns an
	// [*InvalidArgumentError].
	Append(ctx context.Context, stream string, expected ExpectedVersion, events ...EventData) (AppendResult, error)

	// ReadStream yields the events of one stream, forward or backward from
	// a version. An absent stream yields nothing and no error.
	ReadStream(ctx context.Context, stream string, opts ReadOptions) iter.Seq2[Event, error]

	// ReadAll yields every committed event after position after that matches
	// filter, in global position order, up to the end of the store as of
	// the read.
	ReadAll(ctx context.Context, after Position, filter Filter) iter.Seq2[Event, error]

	// Subscribe yields every committed event after position after that
	// matches filter, in global position order: first those already stored
	// (catch-up), then new ones as they are committed (live). It never skips
	// a committed event. It runs until ctx ends or the consumer stops
	// ranging; when ctx ends it yields ctx.Err() last.
	Subscribe(ctx context.Context, after Position, filter Filter) iter.Seq2[Event, error]

	// Close releases the store's resources. Subscriptions end with
	// [ErrClosed].
	Close() error
}

// AppendResult is the outcome of a successful [Store.Append].
type AppendResult struct {
	// FirstVersion and LastVersion are the stream versions of the first and
	// last appended events.
	FirstVersion, LastVersion uint64
	// Position is the global position of the last appended event.
	Position Position
	// Duplicate reports that the stream already held these events: nothing
	// was written, and the versions and position are those of the earlier
	// append.
	Duplicate bool
}

// End, as [ReadOptions.From], starts a backward read at the last event.
const End uint64 = math.MaxUint64

// ReadOptions says where and in which direction [Store.ReadStream] reads.
// The zero value reads forward from the first event.
type ReadOptions struct {
	// From is the version of the first event to yield. Reading backward,
	// use [End] to start at the last event.
	From uint64
	// Backward reads from From towards version 0.
	Backward bool
	// Limit, when positive, ends the read after that many events, and the
	// store reads no more than that: Backward(End) with Limit 1 is the
	// stream's last event, at the cost of one.
	Limit int
}

// Forward returns options to read forward from version from.
func Forward(from uint64) ReadOptions { return ReadOptions{From: from} }

// Backward returns options to read backward from version from; [End]
// starts at the last event.
func Backward(from uint64) ReadOptions { return ReadOptions{From: from, Backward: true} }
