package storekit

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/internal/clip"
)

// DeadLetterKey is what identifies a dead letter and the state it is in,
// without its event's payload: what a consumer needs to resolve the dead
// letters of the events it handles again.
type DeadLetterKey struct {
	// ID is the dead letter's.
	ID string
	// Stream, EventID and Part are its key with the consumer's name: the
	// part of the stored event that failed.
	Stream  string
	EventID uuid.UUID
	Part    int
	// Position is the event's.
	Position eventstore.Position
	// Generation is the dead letter's (see [eventstore.DeadLetter.Generation]).
	Generation uint64
}

// DeadLetterNotFoundError reports a dead letter ID that a consumer does not
// have (never parked, or already retried or skipped).
type DeadLetterNotFoundError struct {
	Consumer string
	ID       string
}

func (e *DeadLetterNotFoundError) Error() string {
	return fmt.Sprintf("consumer %s has no dead letter %s", clip.Quote(e.Consumer), clip.Quote(e.ID))
}

// Is makes errors.Is(err, ErrDeadLetterNotFound) true.
func (e *DeadLetterNotFoundError) Is(target error) bool {
	return target == eventstore.ErrDeadLetterNotFound
}

// DeadLetterChangedError reports a park that was a compare-and-set on a
// dead letter's generation (a failed retry recording its failure) and
// found the dead letter changed since it was read: parked again (Actual is
// its generation now), or deleted (Actual is 0; the error then also
// matches [eventstore.ErrDeadLetterNotFound]), by a concurrent retry, a skip or the
// consumer. Nothing was written.
type DeadLetterChangedError struct {
	Consumer string
	ID       string
	// Stream, Version and Part locate the event part the dead letter is of.
	Stream  string
	Version uint64
	Part    int
	// Generation is the one read; Actual the stored one, 0 when it is gone.
	Generation, Actual uint64
}

func (e *DeadLetterChangedError) Error() string {
	now := fmt.Sprintf("is at generation %d", e.Actual)
	if e.Actual == 0 {
		now = "is gone (retried or skipped)"
	}
	return fmt.Sprintf("consumer %s: dead letter %s (event %d of stream %s, part %d) %s, not at generation %d as read",
		clip.Quote(e.Consumer), clip.Quote(e.ID), e.Version, clip.Quote(e.Stream), e.Part, now, e.Generation)
}

// Is makes errors.Is match [eventstore.ErrDeadLetterChanged], and
// [eventstore.ErrDeadLetterNotFound] when the dead letter is gone.
func (e *DeadLetterChangedError) Is(target error) bool {
	return target == eventstore.ErrDeadLetterChanged || (e.Actual == 0 && target == eventstore.ErrDeadLetterNotFound)
}

// DeadLetterStore keeps parked events per consumer.
//
// A dead letter is unique per (Consumer, Event.StreamID, Event.ID, Part):
// parking the same part of the same event again (a replay after the
// consumer's checkpoint did not pass the event) updates the existing dead
// letter (its error, attempts and last failure, and one more generation;
// ID and first failure stay) instead of adding one. The stream is part of
// the key because event IDs are unique per stream only: the same ID in two
// streams is two events, and two dead letters. In SQL: a unique key on
// (consumer, stream, event_id, part) and an upsert.
//
// An ID names one dead letter from its first park until it is deleted; a
// later park of the same key gets a new ID. The generation tells the
// states of one dead letter apart, so that whoever acts on a dead letter
// it read (a retry that failed records its failure) acts on that state
// only, and never brings back one that was retried or skipped meanwhile.
type DeadLetterStore interface {
	// ParkDeadLetter stores d, or updates the dead letter already parked for
	// the same consumer, stream, event ID and part, and returns the stored
	// record, with its generation. d.ID may be empty; the store then
	// assigns a new ULID.
	//
	// With d.Generation set, the park is a compare-and-set: it updates the
	// dead letter d.ID (which must be set, and be of d's event and part)
	// only while it is at that generation, and otherwise writes nothing
	// and returns a [*DeadLetterChangedError] (see [CheckDeadLetterGeneration]).
	ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error)
	// DeadLetters yields the dead letters of consumer, oldest first (by ID).
	DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error]
	// DeadLetterKeys yields the keys of consumer's dead letters whose events
	// lie after after and not after through, in the order of their events'
	// positions (then parts), without reading their payloads: a consumer
	// resuming from a checkpoint asks for the dead letters of the events it
	// is to handle again, a bounded range, and needs no more. Positions
	// compare as [eventstore.Position.Compare] says; a store with a SQL column for the
	// major half can select on it and refine in Go ([DeadLetterKeyRange],
	// [SortDeadLetterKeys]).
	DeadLetterKeys(ctx context.Context, consumer string, after, through eventstore.Position) iter.Seq2[DeadLetterKey, error]
	// DeadLetter returns one dead letter, or a [*DeadLetterNotFoundError].
	DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error)
	// CountDeadLetters returns how many dead letters consumer has.
	CountDeadLetters(ctx context.Context, consumer string) (int, error)
	// DeleteDeadLetter removes a dead letter (it was retried successfully or
	// skipped), or returns a [*DeadLetterNotFoundError].
	DeleteDeadLetter(ctx context.Context, consumer, id string) error
}

// CheckDeadLetter checks a dead letter to park, as every
// [DeadLetterStore] does first, so that all of them store the same dead
// letters and refuse the others with the same [*eventstore.InvalidArgumentError]:
//
//   - a valid consumer name, and an ID that is empty or a ULID;
//   - an event that a store could have returned: an ID, a position other
//     than the start, a version and a position major below 2^63, a valid
//     stream name, and a type, metadata and size as [eventstore.Store.Append] takes
//     them (nil Data counts as empty);
//   - a Part and Attempts from 0 to 2^31-1;
//   - a Generation below 2^63, and an ID when it is set;
//   - an Error that is valid UTF-8 without NUL bytes;
//   - times (FirstFailure, LastFailure, ClaimedUntil, Event.RecordedAt) that are zero or
//     within the years 1678 to 2262, which every store can hold (SQLite
//     keeps Unix nanoseconds).
//
// The Field of the error names the dead letter's field: "dead letter part",
// "dead letter event type", "dead letter time", ...
func CheckDeadLetter(d eventstore.DeadLetter) error {
	if err := ValidateConsumerName(d.Consumer); err != nil {
		return err
	}
	bad := func(field, reason string) error {
		return &eventstore.InvalidArgumentError{Stream: d.Event.StreamID, Consumer: d.Consumer, Index: -1, Field: "dead letter " + field, Reason: reason}
	}
	e := d.Event
	switch {
	case e.ID == uuid.Nil:
		return bad("event ID", "is zero")
	case e.StreamID == "":
		return bad("stream", "is empty")
	case e.Position.IsZero():
		return bad("position", "is the start position, which no event has")
	case e.Position.Major > math.MaxInt64:
		return bad("position", fmt.Sprintf("is %s, beyond any stored event's (major below 2^63)", e.Position))
	case e.Version > math.MaxInt64:
		return bad("version", fmt.Sprintf("is %d, above the largest stream version, 2^63-1", e.Version))
	case d.Part < 0 || d.Part > math.MaxInt32:
		return bad("part", fmt.Sprintf("is %d, not from 0 to 2^31-1", d.Part))
	case d.Attempts < 0 || d.Attempts > math.MaxInt32:
		return bad("attempts", fmt.Sprintf("is %d, not from 0 to 2^31-1", d.Attempts))
	case d.Generation > math.MaxInt64:
		return bad("generation", fmt.Sprintf("is %d, beyond any stored dead letter's (below 2^63)", d.Generation))
	case d.Generation != 0 && d.ID == "":
		return bad("ID", "is empty, and a park with a generation updates the dead letter that its ID names")
	case !names.StorableText(d.Error):
		return bad("error", fmt.Sprintf("%s is not valid UTF-8 without NUL bytes", clip.Quote(d.Error)))
	}
	if reason := names.StreamProblem(e.StreamID); reason != "" {
		return bad("stream", reason)
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	if field, reason := eventDataProblem(&e.EventData); reason != "" {
		return bad("event "+field, reason)
	}
	for _, t := range [...]struct {
		name string
		at   time.Time
	}{{"first failure", d.FirstFailure}, {"last failure", d.LastFailure}, {"claimed until", d.ClaimedUntil}, {"event recorded at", e.RecordedAt}} {
		if !t.at.IsZero() && !time.Unix(0, t.at.UnixNano()).Equal(t.at) {
			return bad("time", fmt.Sprintf("%s %s is outside the years 1678 to 2262, which every store can hold",
				t.name, t.at.Format(time.RFC3339)))
		}
	}
	if d.ID != "" {
		if _, err := ulid.ParseStrict(d.ID); err != nil {
			return bad("ID", fmt.Sprintf("%s is not a ULID: %v", clip.Quote(d.ID), err))
		}
	}
	return nil
}

// CheckDeadLetterID decides a park of d whose ID the store already holds for
// the dead letter of (stream, eventID, part): nil when that is d's own key
// (parking it again updates it); otherwise an [*eventstore.InvalidArgumentError] with
// Field "dead letter ID", since one ID cannot name two dead letters. Every
// store calls it, and writes nothing when it refuses.
func CheckDeadLetterID(d eventstore.DeadLetter, stream string, eventID uuid.UUID, part int) error {
	if stream == d.Event.StreamID && eventID == d.Event.ID && part == d.Part {
		return nil
	}
	return &eventstore.InvalidArgumentError{Stream: d.Event.StreamID, Consumer: d.Consumer, Index: -1, Field: "dead letter ID",
		Reason: fmt.Sprintf("%s is already used by the dead letter of event %s (stream %s, part %d), not of event %s part %d",
			clip.Quote(d.ID), eventID, clip.Quote(stream), part, d.Event.ID, d.Part)}
}

// CheckDeadLetterLookup checks the arguments of [DeadLetterStore.DeadLetter]
// and [DeadLetterStore.DeleteDeadLetter] as every store does first: a
// consumer name that is not valid is an [*eventstore.InvalidArgumentError]; an ID that
// is not a ULID, which no stored dead letter has, is a
// [*DeadLetterNotFoundError] without asking the store (which might not even
// be able to compare it, as PostgreSQL cannot text with a NUL byte).
func CheckDeadLetterLookup(consumer, id string) error {
	if err := ValidateConsumerName(consumer); err != nil {
		return err
	}
	if _, err := ulid.ParseStrict(id); err != nil {
		return &DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return nil
}

// CheckDeadLetterGeneration decides a park of d whose Generation is set
// (the compare-and-set of [DeadLetterStore.ParkDeadLetter]) against the
// dead letter that the store holds under d.ID, stored (nil when it holds
// none): nil when stored is d's event part at d.Generation; an
// [*eventstore.InvalidArgumentError] when d.ID names the dead letter of another event
// part (see [CheckDeadLetterID]); otherwise a [*DeadLetterChangedError].
// Every store calls it, and writes nothing when it refuses.
func CheckDeadLetterGeneration(d eventstore.DeadLetter, stored *DeadLetterKey) error {
	changed := &DeadLetterChangedError{Consumer: d.Consumer, ID: d.ID, Stream: d.Event.StreamID,
		Version: d.Event.Version, Part: d.Part, Generation: d.Generation}
	if stored == nil {
		return changed
	}
	if err := CheckDeadLetterID(d, stored.Stream, stored.EventID, stored.Part); err != nil {
		return err
	}
	if stored.Generation != d.Generation {
		changed.Actual = stored.Generation
		return changed
	}
	return nil
}

// ListSeq is the iterator of a list that a store reads whole, when the
// iterator is ranged, before it yields the first item: a bounded list
// (the dead letters of a consumer, their keys in a range), read so that a
// caller that writes to the store inside its loop holds none of it. An
// error of list is yielded alone.
func ListSeq[T any](list func() ([]T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		items, err := list()
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		for _, item := range items {
			if !yield(item, nil) {
				return
			}
		}
	}
}

// DeadLetterKeyRange returns the majors, lo to hi, of the positions that
// a [DeadLetterStore.DeadLetterKeys] of (after, through] may yield, as a
// SQL store selects them on a signed 64-bit column (stored dead letters'
// majors are below 2^63, see [CheckDeadLetter]), and false when none can
// be in it. The rows selected so still need [SortDeadLetterKeys], which
// drops those that the minor halves put outside the range.
func DeadLetterKeyRange(after, through eventstore.Position) (lo, hi int64, ok bool) {
	if after.Major > math.MaxInt64 || !after.Before(through) {
		return 0, 0, false
	}
	return int64(after.Major), int64(min(through.Major, math.MaxInt64)), true
}

// SortDeadLetterKeys keeps the keys whose positions are after after and
// not after through, in the order DeadLetterKeys yields them: by
// position, then part, then ID.
func SortDeadLetterKeys(keys []DeadLetterKey, after, through eventstore.Position) []DeadLetterKey {
	keys = slices.DeleteFunc(keys, func(k DeadLetterKey) bool {
		return !after.Before(k.Position) || through.Before(k.Position)
	})
	slices.SortFunc(keys, func(a, b DeadLetterKey) int {
		return cmp.Or(a.Position.Compare(b.Position), cmp.Compare(a.Part, b.Part), cmp.Compare(a.ID, b.ID))
	})
	return keys
}

// KeyOf returns the key of dead letter d.
func KeyOf(d eventstore.DeadLetter) DeadLetterKey {
	return DeadLetterKey{ID: d.ID, Stream: d.Event.StreamID, EventID: d.Event.ID, Part: d.Part,
		Position: d.Event.Position, Generation: d.Generation}
}
