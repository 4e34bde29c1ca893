package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/internal/clip"
)

var (
	// ErrWrongVersion matches every [*WrongVersionError]: the stream was not
	// in the state the append expected.
	ErrWrongVersion = errors.New("wrong expected version")
	// ErrInvalidArgument matches every [*InvalidArgumentError] and other
	// rejections of malformed input. Nothing was written.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrEventIDConflict matches every [*EventIDConflictError]: an append
	// repeats some, but not all, of the events already stored, or repeats
	// them at another place.
	ErrEventIDConflict = errors.New("event ID conflict")
	// ErrClosed is returned by a store that has been closed.
	ErrClosed = errors.New("eventstore: store closed")
	// ErrCorrupt matches errors about stored data that cannot be read back:
	// a damaged file or a row that a store did not write.
	ErrCorrupt = errors.New("eventstore: stored data is corrupt")
	// ErrUnavailable matches errors of an operation that failed for a
	// reason expected to pass, having written nothing: the SQLite file
	// locked by another process for longer than the store waits
	// (sqlite.ErrBusy). Trying again later may succeed; a projection's or
	// saga runner's Run starts over after a pause instead of returning.
	// An append to a server that lost the connection before its reply is
	// the one exception: it may have been written, and no one can tell.
	// Sending it again with the same event IDs stores it once either way
	// (the command bus's IDs are fixed per command); with zero IDs, which
	// the store fills in anew, it may be stored twice.
	ErrUnavailable = errors.New("eventstore: store temporarily unavailable")
)

// WrongVersionError reports an append whose expected version did not match
// the stream. Nothing was written.
type WrongVersionError struct {
	Stream   string
	Expected ExpectedVersion
	// Actual is the state of the stream when the append was checked:
	// [NoStream] or the exact version of its last event.
	Actual ExpectedVersion
}

func (e *WrongVersionError) Error() string {
	return fmt.Sprintf("append to stream %q: wrong expected version: expected %s, actual %s",
		e.Stream, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrWrongVersion) true.
func (e *WrongVersionError) Is(target error) bool { return target == ErrWrongVersion }

// InvalidArgumentError reports malformed input to a store. Nothing was
// written. Its message names the argument that was wrong (Field), and where
// the call was aimed: the stream, the consumer, the event of an append.
// Values in the message are quoted up to 64 bytes, with the length of a
// longer one, so that a huge argument does not make a huge message.
type InvalidArgumentError struct {
	// Stream is the stream the call named, if any.
	Stream string
	// Consumer is the consumer (checkpoint, lease or dead letter owner) the
	// call named, if any.
	Consumer string
	// Index is the position of the offending event in the append, or -1
	// when the problem is not with one event.
	Index int
	// Field names the argument that is wrong: "stream name", "type",
	// "data", "consumer name", "filter type", "schema name", ...
	Field string
	// Reason says why it is wrong.
	Reason string
}

func (e *InvalidArgumentError) Error() string {
	var b strings.Builder
	b.WriteString("invalid argument: ")
	sep := func() {
		if b.Len() > len("invalid argument: ") {
			b.WriteString(", ")
		}
	}
	if e.Stream != "" {
		b.WriteString("stream " + clip.Quote(e.Stream))
	}
	if e.Consumer != "" {
		sep()
		b.WriteString("consumer " + clip.Quote(e.Consumer))
	}
	if e.Index >= 0 {
		sep()
		fmt.Fprintf(&b, "event %d", e.Index)
	}
	if b.Len() > len("invalid argument: ") {
		b.WriteString(": ")
	}
	b.WriteString(e.Field)
	b.WriteString(" ")
	b.WriteString(e.Reason)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// EventIDConflictError reports an append that repeats an event ID already
// stored in the stream, but not as an exact repeat of an earlier append
// (same events, same order, same place). Nothing was written.
type EventIDConflictError struct {
	Stream string
	// EventID is the repeated ID.
	EventID uuid.UUID
	// Index is the event's position in the rejected append.
	Index int
	// StoredVersion is the version at which the stream already holds EventID.
	StoredVersion uint64
	// Displaced reports that the append repeats the stored events exactly,
	// but its expected version (Expected) puts them at another place than
	// the one where they are stored: it is not the append that stored them.
	Displaced bool
	// Expected is the append's expected version.
	Expected ExpectedVersion
}

func (e *EventIDConflictError) Error() string {
	if e.Displaced {
		return fmt.Sprintf("append to stream %q expecting %s: its events are already stored from version %d, "+
			"where an append expecting %s would not have written them (event %d, ID %s)",
			e.Stream, e.Expected, e.StoredVersion, e.Expected, e.Index, e.EventID)
	}
	return fmt.Sprintf("append to stream %q: event %d (ID %s) is already stored at version %d, "+
		"and the append is not an exact repeat of the one that stored it",
		e.Stream, e.Index, e.EventID, e.StoredVersion)
}

// Is makes errors.Is(err, ErrEventIDConflict) true.
func (e *EventIDConflictError) Is(target error) bool { return target == ErrEventIDConflict }
