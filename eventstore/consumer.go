package eventstore

import (
	"errors"
	"time"
)

// A consumer's checkpoint, lease and dead letters are refused with errors
// that match these (the typed errors behind them, with the details, are
// package storekit's): a consumer that sees one has been overtaken, and
// stops or reads again rather than apply anything twice.
var (
	// ErrFenced: a checkpoint save carried a lease fence lower than the
	// stored one; another holder of the consumer's lease has taken over.
	ErrFenced = errors.New("checkpoint is fenced by a newer lease holder")
	// ErrCheckpointMoved: a checkpoint save expected a previous position
	// that is not the stored one; someone else moved the checkpoint since
	// the consumer read it.
	ErrCheckpointMoved = errors.New("checkpoint moved since it was read")
	// ErrLeaseLost: a renewal or release of a lease that the caller no
	// longer holds (it expired and another took it, or it was released).
	ErrLeaseLost = errors.New("lease lost")
	// ErrDeadLetterNotFound: no dead letter has the ID, for the consumer,
	// that a call named.
	ErrDeadLetterNotFound = errors.New("dead letter not found")
	// ErrDeadLetterChanged: a dead letter was parked again, retried or
	// resolved since the caller read it, so an action decided on what the
	// caller saw is refused.
	ErrDeadLetterChanged = errors.New("dead letter changed since it was read")
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
	// Generation counts the times the dead letter was stored: 1 when it
	// was first parked, one more each time it was parked again. Set, in a
	// dead letter to park, it makes the park a compare-and-set on it (see
	// the dead letter stores of package storekit).
	Generation uint64
	// ClaimedUntil is when the claim of a retry running on the dead letter
	// expires; zero when none claims it. A retry claims the dead letter
	// before it applies anything, renews the claim while it runs and
	// clears it when it records a failure, so that a second retry of the
	// same dead letter meanwhile is refused instead of applying its event
	// again; the claim of a retry that crashed lapses at this time. Stores
	// keep it as each park gives it.
	ClaimedUntil time.Time
}
