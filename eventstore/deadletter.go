package eventstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// DeadLetter is an event that a consumer's handler kept failing on, parked
// so that the events after it are not held up.
type DeadLetter struct {
	// ID identifies the dead letter: a ULID in text form (26 characters),
	// so that dead letters sort by when they were first parked.
	ID string
	// Consumer is the name of the consumer that parked it.
	Consumer string
	// Event is the whole stored event, as the store returned it (before
	// upcasting), so that a retry decodes it with the code of its time.
	Event Event
	// Part is the index of the failed value among those the event decodes
	// into (see codec.Decoded); 0 for events that are not split.
	Part int
	// Error is the text of the last failure.
	Error string
	// Attempts counts the handler runs that failed, retries included.
	Attempts int
	// FirstFailure and LastFailure are when the first and the last failed
	// attempt ended, in UTC.
	FirstFailure, LastFailure time.Time
}

// ErrDeadLetterNotFound matches a [*DeadLetterNotFoundError].
var ErrDeadLetterNotFound = errors.New("dead letter not found")

// DeadLetterNotFoundError reports a dead letter ID that a consumer does not
// have (never parked, or already retried or skipped).
type DeadLetterNotFoundError struct {
	Consumer string
	ID       string
}

func (e *DeadLetterNotFoundError) Error() string {
	return fmt.Sprintf("consumer %q has no dead letter %q", e.Consumer, e.ID)
}

// Is makes errors.Is(err, ErrDeadLetterNotFound) true.
func (e *DeadLetterNotFoundError) Is(target error) bool { return target == ErrDeadLetterNotFound }

// DeadLetterStore keeps parked events per consumer.
//
// A dead letter is unique per (Consumer, Event.StreamID, Event.ID, Part):
// parking the same part of the same event again (a failed retry, or a
// replay after the consumer's checkpoint did not pass the event) updates
// the existing dead letter (its error, attempts and last failure; ID and
// first failure stay) instead of adding one. The stream is part of the key
// because event IDs are unique per stream only: the same ID in two streams
// is two events, and two dead letters. In SQL: a unique key on (consumer,
// stream, event_id, part) and an upsert.
type DeadLetterStore interface {
	// ParkDeadLetter stores d, or updates the dead letter already parked for
	// the same consumer, stream, event ID and part, and returns the stored
	// record.
	// d.ID may be empty; the store then assigns a new ULID.
	ParkDeadLetter(ctx context.Context, d DeadLetter) (DeadLetter, error)
	// DeadLetters yields the dead letters of consumer, oldest first (by ID).
	DeadLetters(ctx context.Context, consumer string) iter.Seq2[DeadLetter, error]
	// DeadLetter returns one dead letter, or a [*DeadLetterNotFoundError].
	DeadLetter(ctx context.Context, consumer, id string) (DeadLetter, error)
	// CountDeadLetters returns how many dead letters consumer has.
	CountDeadLetters(ctx context.Context, consumer string) (int, error)
	// DeleteDeadLetter removes a dead letter (it was retried successfully or
	// skipped), or returns a [*DeadLetterNotFoundError].
	DeleteDeadLetter(ctx context.Context, consumer, id string) error
}

// CheckDeadLetter checks a dead letter to park: a valid consumer name, an
// event with an ID, a stream and a position, a part that is not negative,
// and an ID that is empty or a ULID. Every [DeadLetterStore] calls it first.
func CheckDeadLetter(d DeadLetter) error {
	if err := ValidateConsumerName(d.Consumer); err != nil {
		return err
	}
	bad := func(field, reason string) error {
		return &InvalidArgumentError{Stream: d.Event.StreamID, Consumer: d.Consumer, Index: -1, Field: field, Reason: reason}
	}
	switch {
	case d.Event.ID == uuid.Nil:
		return bad("dead letter event ID", "is zero")
	case d.Event.StreamID == "":
		return bad("dead letter stream", "is empty")
	case d.Event.Position.IsZero():
		return bad("dead letter position", "is the start position, which no event has")
	case d.Part < 0:
		return bad("dead letter part", fmt.Sprintf("is %d, below zero", d.Part))
	}
	if d.ID != "" {
		if _, err := ulid.ParseStrict(d.ID); err != nil {
			return bad("dead letter ID", fmt.Sprintf("%q is not a ULID: %v", d.ID, err))
		}
	}
	return nil
}
