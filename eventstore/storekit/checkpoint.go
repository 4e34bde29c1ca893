package storekit

import (
	"context"
	"fmt"
	"math"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"
)

// Fence is a lease's fencing token: it grows each time a lease changes
// hands. A checkpoint remembers the highest fence that moved it, and refuses
// a lower one, so that a consumer that lost its lease while it was paused
// cannot move the checkpoint that its successor now owns.
//
// The zero Fence is for consumers that run without a lease; it can move only
// checkpoints that no fenced consumer has moved. Fences stay below 2^63, so
// that SQL stores keep them in a signed 64-bit column.
type Fence uint64

// Int64 returns the fence as SQL stores keep it, a signed 64-bit integer,
// or -1 for a fence of 2^63 or more: no store hands one out, so a forged one
// matches no row.
func (f Fence) Int64() int64 {
	if f > math.MaxInt64 {
		return -1
	}
	return int64(f)
}

// Checkpoint is what a [CheckpointStore] holds for one named consumer.
type Checkpoint struct {
	// Position is the global position of the last stored event whose
	// effects are applied; the consumer resumes after it.
	Position eventstore.Position
	// Fence is the highest fence that saved this checkpoint.
	Fence Fence
}

// CheckpointConflictError reports a refused [CheckpointStore.SaveCheckpoint].
// Nothing was written. It matches [eventstore.ErrFenced] when the fence was stale,
// otherwise [eventstore.ErrCheckpointMoved].
type CheckpointConflictError struct {
	// Consumer is the checkpoint's name.
	Consumer string
	// Expected and Fence are what the save asked for.
	Expected eventstore.Position
	Fence    Fence
	// Actual is the stored checkpoint (zero when there is none).
	Actual Checkpoint
}

func (e *CheckpointConflictError) Error() string {
	if e.Fence < e.Actual.Fence {
		return fmt.Sprintf("save checkpoint of consumer %q: fence %d is older than the stored fence %d: another holder owns it",
			e.Consumer, e.Fence, e.Actual.Fence)
	}
	return fmt.Sprintf("save checkpoint of consumer %q: expected it at %s, but it is at %s",
		e.Consumer, e.Expected, e.Actual.Position)
}

// Is makes errors.Is match [eventstore.ErrFenced] or [eventstore.ErrCheckpointMoved].
func (e *CheckpointConflictError) Is(target error) bool {
	if e.Fence < e.Actual.Fence {
		return target == eventstore.ErrFenced
	}
	return target == eventstore.ErrCheckpointMoved
}

// CheckSave decides a [CheckpointStore.SaveCheckpoint] against the stored
// checkpoint (the zero Checkpoint when there is none), so that every store
// applies the same rule: the save goes ahead when stored.Position equals
// expected and stored.Fence is not above fence.
func CheckSave(consumer string, stored Checkpoint, expected eventstore.Position, fence Fence) error {
	if stored.Position != expected || fence < stored.Fence {
		return &CheckpointConflictError{Consumer: consumer, Expected: expected, Fence: fence, Actual: stored}
	}
	return nil
}

// CheckFence checks the fence of a [CheckpointStore.SaveCheckpoint], as
// every store does before [CheckSave]: below 2^63, as every fence that a
// [LeaseStore] hands out is, so that SQL stores can keep it in a signed
// 64-bit column and no store keeps a fence that another could not.
func CheckFence(consumer string, fence Fence) error {
	if fence > math.MaxInt64 {
		return &eventstore.InvalidArgumentError{Consumer: consumer, Index: -1, Field: "checkpoint fence",
			Reason: fmt.Sprintf("is %d, not below 2^63", fence)}
	}
	return nil
}

// CheckpointStore keeps the checkpoints of named consumers (projections,
// sagas): how far each has applied the global log.
//
// A save is a compare-and-set on the position with a fence check, which in
// SQL is one statement:
//
//	UPDATE checkpoints SET position = $next, fence = $fence
//	 WHERE name = $name AND position = $expected AND fence <= $fence
//
// (or an INSERT when the consumer has no row and $expected is the start).
// The compare-and-set makes two consumers that run without a lease fail
// instead of double-applying in transactional mode; the fence makes a former
// lease holder fail even before its successor has moved the checkpoint,
// because the successor first saves the position it read under its own fence
// (a claim: expected = next = stored position).
type CheckpointStore interface {
	// Checkpoint returns the stored checkpoint of consumer name; the zero
	// Checkpoint (position [eventstore.Start], fence 0) when it has none.
	Checkpoint(ctx context.Context, name string) (Checkpoint, error)
	// SaveCheckpoint moves the checkpoint of consumer name from expected to
	// next, and records fence, when the stored position is expected and the
	// stored fence is not above fence (see [CheckSave]). Otherwise it writes
	// nothing and returns a [*CheckpointConflictError]. next may be before
	// expected: that resets a consumer for a rebuild.
	SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence Fence) error
}

// TxCheckpointStore is the transactional-projection hook of a store whose
// database also holds read models: the consumer runs its handler on a batch
// of events and moves its checkpoint in one transaction, so that the read
// model counts each event exactly once across crashes.
//
// Tx is the store's transaction type (*sql.Tx for SQLite, pgx.Tx for
// PostgreSQL). The consumer calls InTx once per batch and, inside fn,
// SaveCheckpointTx and possibly ParkDeadLetterTx and DeleteDeadLetterTx
// with the same tx.
//
// The dead-letter methods are here, not in [DeadLetterStore], because they
// are what makes a transactional consumer exactly once around failures: an
// event parked in the transaction that moves the checkpoint past it is
// either parked and passed, or neither (a crash in between replays it, and
// a successful replay leaves no dead letter behind to be applied again by a
// retry); a retried dead letter is deleted in the transaction of its
// effect.
type TxCheckpointStore[Tx any] interface {
	CheckpointStore
	// InTx runs fn in one transaction and commits it when fn returns nil;
	// when fn fails, it rolls back and returns fn's error as it is (the
	// consumer matches its own error types with errors.As). A commit error
	// is returned as well, and then nothing of fn's work is kept.
	InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// SaveCheckpointTx is [CheckpointStore.SaveCheckpoint] inside tx: the
	// move becomes visible when, and only when, tx commits.
	SaveCheckpointTx(ctx context.Context, tx Tx, name string, expected, next eventstore.Position, fence Fence) error
	// ParkDeadLetterTx is [DeadLetterStore.ParkDeadLetter] inside tx: the
	// dead letter is stored (or the one with the same key updated) when,
	// and only when, tx commits. The record it returns is what the commit
	// stores, unless another transaction parks the same key first.
	ParkDeadLetterTx(ctx context.Context, tx Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error)
	// DeleteDeadLetterTx is [DeadLetterStore.DeleteDeadLetter] inside tx,
	// so that a dead letter retried into a read model is resolved exactly
	// when its effect commits.
	DeleteDeadLetterTx(ctx context.Context, tx Tx, consumer, id string) error
}

// ValidateConsumerName checks the name of a consumer, as checkpoint, dead
// letter and lease stores take it: not empty, at most [MaxStreamLen] bytes
// of printable UTF-8. Every such store calls it first, so that all reject
// the same names with the same [*eventstore.InvalidArgumentError].
func ValidateConsumerName(name string) error {
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Consumer: name, Index: -1, Field: "consumer name", Reason: reason}
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > MaxStreamLen:
		return bad(fmt.Sprintf("is %d bytes long, more than the limit of %d", len(name), MaxStreamLen))
	case !names.Printable(name):
		return bad("is not printable UTF-8")
	}
	return nil
}
