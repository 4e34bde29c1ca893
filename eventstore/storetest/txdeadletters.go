package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// txDeadLetterStore is a store whose transactions hold dead letters as well
// as checkpoints, as a transactional consumer uses it.
type txDeadLetterStore[Tx any] interface {
	storekit.TxCheckpointStore[Tx]
	storekit.DeadLetterStore
}

// txDeadLetterTests check the dead-letter methods of
// [storekit.TxCheckpointStore]: a dead letter parked or deleted in a
// transaction changes when, and only when, the transaction commits, and
// together with its checkpoint move.
func txDeadLetterTests[Tx any]() []testCase[txDeadLetterStore[Tx]] {
	return []testCase[txDeadLetterStore[Tx]]{
		{"ParkCommitsWithCheckpoint", testTxParkWithCheckpoint[Tx]},
		{"ParkUpdatesTheParkedOne", testTxParkUpdates[Tx]},
		{"DeleteCommitsWithEffect", testTxDelete[Tx]},
		{"ReparkIsCompareAndSet", testTxRepark[Tx]},
		{"PanicRollsBackAndFreesTheCheckpoint", testTxPanic[Tx]},
	}
}

var errRollBack = errors.New("storetest: roll back")

func testTxParkWithCheckpoint[Tx any](t testing.TB, s txDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txpark")
	d := deadLetter(name, 3, 0)
	next := d.Event.Position
	// A transaction that fails keeps neither the dead letter nor the move.
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		_, err := s.ParkDeadLetterTx(ctx, tx, d)
		check.NoError(t, err)
		check.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, next, 1))
		return errRollBack
	})
	check.ErrorIs(t, err, errRollBack)
	check.Len(t, listDeadLetters(t, s, name), 0, "a dead letter of a rolled-back transaction")
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{})

	var parked eventstore.DeadLetter
	check.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		check.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, next, 1))
		var err error
		parked, err = s.ParkDeadLetterTx(ctx, tx, d)
		return err
	}))
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1)
	d.ID, d.Generation = parked.ID, 1
	sameLetter(t, d, all[0])
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: next, Fence: 1})

	// Bad input is refused as ParkDeadLetter refuses it.
	bad := deadLetter(name, 4, -1)
	err = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		_, err := s.ParkDeadLetterTx(ctx, tx, bad)
		return err
	})
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

func testTxParkUpdates[Tx any](t testing.TB, s txDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txrepark")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	// The same stream, event and part parked again in a transaction (a
	// consumer handling the event again after a crash): one dead letter,
	// updated on commit, its ID and first failure kept.
	d.Attempts, d.Error, d.LastFailure = 8, "failing again", d.LastFailure.Add(time.Minute)
	d.FirstFailure = d.FirstFailure.Add(time.Hour)
	var again eventstore.DeadLetter
	check.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		again, err = s.ParkDeadLetterTx(ctx, tx, d)
		return err
	}))
	check.Equal(t, again.ID, first.ID)
	all := listDeadLetters(t, s, name)
	check.Len(t, all, 1)
	check.Equal(t, all[0].ID, first.ID)
	check.Equal(t, all[0].Attempts, 8)
	check.Equal(t, all[0].Error, "failing again")
	check.Within(t, all[0].FirstFailure, first.FirstFailure, time.Millisecond)
}

func testTxDelete[Tx any](t testing.TB, s txDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txdelete")
	d := mustPark(t, s, deadLetter(name, 3, 0))
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		check.NoError(t, s.DeleteDeadLetterTx(ctx, tx, name, d.ID))
		return errRollBack
	})
	check.ErrorIs(t, err, errRollBack)
	check.Len(t, listDeadLetters(t, s, name), 1, "a deletion of a rolled-back transaction")
	check.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		return s.DeleteDeadLetterTx(ctx, tx, name, d.ID)
	}))
	check.Len(t, listDeadLetters(t, s, name), 0)
	// Deleting one that is gone fails the transaction: two retries of one
	// dead letter cannot both commit.
	err = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		return s.DeleteDeadLetterTx(ctx, tx, name, d.ID)
	})
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
}

// testTxPanic: a function that panics inside InTx (a read model's bug,
// recovered by the caller, as net/http recovers an admin request) keeps
// nothing, and leaves the checkpoint it moved free: the next transaction
// that moves it must not wait for the one that panicked.
func testTxPanic[Tx any](t testing.TB, s txDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txpanic")
	d := deadLetter(name, 3, 0)
	func() {
		defer func() { check.Equal(t, recover(), "read model bug", "the panic goes on to the caller") }()
		_ = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
			check.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, d.Event.Position, 1))
			_, err := s.ParkDeadLetterTx(ctx, tx, d)
			check.NoError(t, err)
			panic("read model bug")
		})
	}()
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{}, "a panicking transaction moved the checkpoint")
	check.Len(t, listDeadLetters(t, s, name), 0, "a panicking transaction parked a dead letter")

	bounded, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	check.NoError(t, s.InTx(bounded, func(ctx context.Context, tx Tx) error {
		return s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, d.Event.Position, 1)
	}), "the checkpoint stays locked after a transaction that panicked")
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: d.Event.Position, Fence: 1})
}

// testTxRepark: ParkDeadLetterTx with the generation read is the
// compare-and-set of ParkDeadLetter, committed with the transaction.
func testTxRepark[Tx any](t testing.TB, s txDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txcas")
	read := mustPark(t, s, deadLetter(name, 3, 0))
	read.Error = "failed again"
	park := func(d eventstore.DeadLetter, commit bool) (eventstore.DeadLetter, error) {
		var got eventstore.DeadLetter
		err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
			var err error
			if got, err = s.ParkDeadLetterTx(ctx, tx, d); err != nil || commit {
				return err
			}
			return errRollBack
		})
		return got, err
	}
	_, err := park(read, false)
	check.ErrorIs(t, err, errRollBack)
	got, err := s.DeadLetter(ctx, name, read.ID)
	check.NoError(t, err)
	check.Equal(t, got.Generation, uint64(1), "a rolled-back compare-and-set changed the dead letter")

	second, err := park(read, true)
	check.NoError(t, err)
	check.Equal(t, second.Generation, uint64(2))
	got, err = s.DeadLetter(ctx, name, read.ID)
	check.NoError(t, err)
	check.Equal(t, got.Error, "failed again")
	check.Equal(t, got.Generation, uint64(2))

	read.Error = "stale"
	_, err = park(read, true)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	got, err = s.DeadLetter(ctx, name, read.ID)
	check.NoError(t, err)
	check.Equal(t, got.Error, "failed again", "a stale compare-and-set committed")
}
