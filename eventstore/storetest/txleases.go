package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// txLeaseStore is a store whose transactions renew leases, as an exclusive
// transactional consumer uses it.
type txLeaseStore[Tx any] interface {
	storekit.TxCheckpointStore[Tx]
	storekit.LeaseStore
	storekit.TxLeaseStore[Tx]
}

// txLeaseTests check a [storekit.TxLeaseStore]: a renewal in a transaction
// holds when, and only when, the transaction commits, and a transaction
// that renews a lease commits only while it is the caller's. Its tests
// wait for short leases (a few hundred milliseconds) to lapse.
func txLeaseTests[Tx any]() []testCase[txLeaseStore[Tx]] {
	return []testCase[txLeaseStore[Tx]]{
		{"RenewalCommitsWithTheTransaction", testTxLeaseCommit[Tx]},
		{"LostLeaseFailsTheTransaction", testTxLeaseLost[Tx]},
		{"RenewalAndAcquireNeverBothWin", testTxLeaseRace[Tx]},
	}
}

// shortTTL is a lease that lapses within a test.
const shortTTL = 200 * time.Millisecond

func testTxLeaseCommit[Tx any](t testing.TB, s txLeaseStore[Tx]) {
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		name := consumerName(t, "txlease")
		a, ok := mustAcquire(t, s, name, "A", shortTTL)
		check.True(t, ok)
		err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
			renewed, err := s.RenewLeaseTx(ctx, tx, a, time.Minute)
			check.NoError(t, err)
			check.Equal(t, renewed.Fence, a.Fence, "a renewal keeps the fence")
			check.Equal(t, renewed.Holder, "A")
			if !commit {
				return errRollBack
			}
			return nil
		})
		if !commit {
			check.ErrorIs(t, err, errRollBack)
		} else {
			check.NoError(t, err)
		}
		time.Sleep(shortTTL + 50*time.Millisecond)
		_, ok = mustAcquire(t, s, name, "B", time.Minute)
		check.Equal(t, ok, !commit, "commit %t: the renewal in the transaction held %t", commit, commit)
	}
}

func testTxLeaseLost[Tx any](t testing.TB, s txLeaseStore[Tx]) {
	ctx := context.Background()
	name := consumerName(t, "txlost")
	a, ok := mustAcquire(t, s, name, "A", shortTTL)
	check.True(t, ok)
	time.Sleep(shortTTL + 50*time.Millisecond)
	_, ok = mustAcquire(t, s, name, "B", time.Minute)
	check.True(t, ok)
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		if err := s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, checkpointAt(3, 0), a.Fence); err != nil {
			return err
		}
		_, err := s.RenewLeaseTx(ctx, tx, a, time.Minute)
		return err
	})
	check.ErrorIs(t, err, eventstore.ErrLeaseLost)
	var lost *storekit.LeaseLostError
	check.ErrorAs(t, err, &lost)
	check.Equal(t, *lost, storekit.LeaseLostError{Name: name, Holder: "A", Fence: a.Fence})
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{}, "the transaction of a lost lease committed")
}

// testTxLeaseRace: A renews its lapsed lease in a transaction while B
// tries to acquire it. A store either makes B wait for A's transaction
// (and B then finds the lease renewed) or lets B have it (and A's commit
// fails): never both.
func testTxLeaseRace[Tx any](t testing.TB, s txLeaseStore[Tx]) {
	ctx := context.Background()
	name := consumerName(t, "txrace")
	a, ok := mustAcquire(t, s, name, "A", 20*time.Millisecond)
	check.True(t, ok)
	time.Sleep(50 * time.Millisecond) // lapsed; nobody took it
	acquired := make(chan bool, 1)
	err := s.InTx(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := s.RenewLeaseTx(ctx, tx, a, time.Minute); err != nil {
			return err
		}
		go func() {
			_, ok, err := s.AcquireLease(context.Background(), name, "B", time.Minute)
			if err != nil {
				t.Errorf("B acquires: %v", err)
			}
			acquired <- ok
		}()
		time.Sleep(100 * time.Millisecond)
		return s.SaveCheckpointTx(ctx, tx, name, eventstore.Start, checkpointAt(3, 0), a.Fence)
	})
	bWon := <-acquired
	if bWon {
		check.ErrorIs(t, err, eventstore.ErrLeaseLost, "B acquired the lease, and A's transaction committed with it renewed")
		check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{})
		return
	}
	check.NoError(t, err, "B was refused the lease, and A's transaction did not commit")
	check.Equal(t, mustCheckpoint(t, s, name).Position, checkpointAt(3, 0))
}
