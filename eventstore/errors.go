package eventstore

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
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
// written.
type InvalidArgumentError struct {
	// Stream is the stream the call named, if any.
	Stream string
	// Index is the position of the offending event in the append, or -1
	// when the problem is not with one event.
	Index int
	// Field names what is wrong: "stream", "type", "data", ...
	Field string
	// Reason says why it is wrong.
	Reason string
}

func (e *InvalidArgumentError) Error() string {
	where := fmt.Sprintf("stream %q", e.Stream)
	if e.Index >= 0 {
		where += fmt.Sprintf(", event %d", e.Index)
	}
	return fmt.Sprintf("invalid argument: %s: %s %s", where, e.Field, e.Reason)
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
}

func (e *EventIDConflictError) Error() string {
	return fmt.Sprintf("append to stream %q: event %d (ID %s) is already stored at version %d, "+
		"and the append is not an exact repeat of the one that stored it",
		e.Stream, e.Index, e.EventID, e.StoredVersion)
}

// Is makes errors.Is(err, ErrEventIDConflict) true.
func (e *EventIDConflictError) Is(target error) bool { return target == ErrEventIDConflict }
