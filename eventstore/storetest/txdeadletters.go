package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// TxDeadLetterStore is a store whose transactions hold dead letters as well
// as checkpoints, as a transactional consumer uses it.
type TxDeadLetterStore[Tx any] interface {
	storekit.TxCheckpointStore[Tx]
	storekit.DeadLetterStore
}

// RunTxDeadLetters runs the conformance suite of the dead-letter methods of
// [storekit.TxCheckpointStore] against the stores that newStore makes,
// each test on a store of its own: a dead letter parked or deleted in a
// transaction changes when, and only when, the transaction commits, and
// together with its checkpoint move.
func RunTxDeadLetters[Tx any](t *testing.T, newStore func(t *testing.T) TxDeadLetterStore[Tx]) {
	runCases(t, newStore, []testCase[TxDeadLetterStore[Tx]]{
		{"ParkCommitsWithCheckpoint", testTxParkWithCheckpoint[Tx]},
		{"ParkUpdatesTheParkedOne", testTxParkUpdates[Tx]},
		{"DeleteCommitsWithEffect", testTxDelete[Tx]},
		{"ReparkIsCompareAndSet", testTxRepark[Tx]},
		{"PanicRollsBackAndFreesTheCheckpoint", testTxPanic[Tx]},
	})
}

var errRollBack = errors.New("storetest: roll back")

func testTxParkWithCheckpoint[Tx any](t *testing.T, s TxDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txpark")
	d := deadLetter(name, 3, 0)
	next := d.Event.Position
	// A transaction that fails keeps neither the dead letter nor the move.
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		_, err := s.ParkDeadLetterTx(ctx, tx, d)
		require.NoError(t, err)
		require.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, next, 1))
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	assert.Empty(t, listDeadLetters(t, s, name), "a dead letter of a rolled-back transaction")
	assert.Equal(t, storekit.Checkpoint{}, mustCheckpoint(t, s, name))

	var parked eventstore.DeadLetter
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		require.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, next, 1))
		var err error
		parked, err = s.ParkDeadLetterTx(ctx, tx, d)
		return err
	}))
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 1)
	d.ID, d.Generation = parked.ID, 1
	sameLetter(t, d, all[0])
	assert.Equal(t, storekit.Checkpoint{Position: next, Fence: 1}, mustCheckpoint(t, s, name))

	// Bad input is refused as ParkDeadLetter refuses it.
	bad := deadLetter(name, 4, -1)
	err = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		_, err := s.ParkDeadLetterTx(ctx, tx, bad)
		return err
	})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}

func testTxParkUpdates[Tx any](t *testing.T, s TxDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txrepark")
	d := deadLetter(name, 3, 0)
	first := mustPark(t, s, d)
	// The same stream, event and part parked again in a transaction (a
	// consumer handling the event again after a crash): one dead letter,
	// updated on commit, its ID and first failure kept.
	d.Attempts, d.Error, d.LastFailure = 8, "failing again", d.LastFailure.Add(time.Minute)
	d.FirstFailure = d.FirstFailure.Add(time.Hour)
	var again eventstore.DeadLetter
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		again, err = s.ParkDeadLetterTx(ctx, tx, d)
		return err
	}))
	assert.Equal(t, first.ID, again.ID)
	all := listDeadLetters(t, s, name)
	require.Len(t, all, 1)
	assert.Equal(t, first.ID, all[0].ID)
	assert.Equal(t, 8, all[0].Attempts)
	assert.Equal(t, "failing again", all[0].Error)
	assert.WithinDuration(t, first.FirstFailure, all[0].FirstFailure, time.Millisecond)
}

func testTxDelete[Tx any](t *testing.T, s TxDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txdelete")
	d := mustPark(t, s, deadLetter(name, 3, 0))
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		require.NoError(t, s.DeleteDeadLetterTx(ctx, tx, name, d.ID))
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	require.Len(t, listDeadLetters(t, s, name), 1, "a deletion of a rolled-back transaction")
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		return s.DeleteDeadLetterTx(ctx, tx, name, d.ID)
	}))
	assert.Empty(t, listDeadLetters(t, s, name))
	// Deleting one that is gone fails the transaction: two retries of one
	// dead letter cannot both commit.
	err = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		return s.DeleteDeadLetterTx(ctx, tx, name, d.ID)
	})
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
}

// testTxPanic: a function that panics inside InTx (a read model's bug,
// recovered by the caller, as net/http recovers an admin request) keeps
// nothing, and leaves the checkpoint it moved free: the next transaction
// that moves it must not wait for the one that panicked.
func testTxPanic[Tx any](t *testing.T, s TxDeadLetterStore[Tx]) {
	ctx, name := context.Background(), consumerName(t, "txpanic")
	d := deadLetter(name, 3, 0)
	func() {
		defer func() { assert.Equal(t, "read model bug", recover(), "the panic goes on to the caller") }()
		_ = s.InTx(ctx, func(ctx context.Context, tx Tx) error {
			require.NoError(t, s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, d.Event.Position, 1))
			_, err := s.ParkDeadLetterTx(ctx, tx, d)
			require.NoError(t, err)
			panic("read model bug")
		})
	}()
	assert.Equal(t, storekit.Checkpoint{}, mustCheckpoint(t, s, name), "a panicking transaction moved the checkpoint")
	assert.Empty(t, listDeadLetters(t, s, name), "a panicking transaction parked a dead letter")

	bounded, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, s.InTx(bounded, func(ctx context.Context, tx Tx) error {
		return s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, d.Event.Position, 1)
	}), "the checkpoint stays locked after a transaction that panicked")
	assert.Equal(t, storekit.Checkpoint{Position: d.Event.Position, Fence: 1}, mustCheckpoint(t, s, name))
}

// testTxRepark: ParkDeadLetterTx with the generation read is the
// compare-and-set of ParkDeadLetter, committed with the transaction.
func testTxRepark[Tx any](t *testing.T, s TxDeadLetterStore[Tx]) {
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
	require.ErrorIs(t, err, errRollBack)
	got, err := s.DeadLetter(ctx, name, read.ID)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), got.Generation, "a rolled-back compare-and-set changed the dead letter")

	second, err := park(read, true)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), second.Generation)
	got, err = s.DeadLetter(ctx, name, read.ID)
	require.NoError(t, err)
	assert.Equal(t, "failed again", got.Error)
	assert.Equal(t, uint64(2), got.Generation)

	read.Error = "stale"
	_, err = park(read, true)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterChanged)
	got, err = s.DeadLetter(ctx, name, read.ID)
	require.NoError(t, err)
	assert.Equal(t, "failed again", got.Error, "a stale compare-and-set committed")
}
