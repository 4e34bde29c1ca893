package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// The contract suites of what aggregates and consumers keep besides
// events, each test on a store in a fresh schema.

func TestSnapshots(t *testing.T) {
	storetest.RunSnapshots(t, func(t *testing.T) storekit.SnapshotStore {
		return newStore(t, postgres.Options{})
	})
}

func TestCommandIndex(t *testing.T) {
	storetest.RunCommandIndex(t, func(t *testing.T) storetest.IndexedStore {
		return newStore(t, postgres.Options{})
	})
}

func TestCheckpoints(t *testing.T) {
	storetest.RunCheckpoints(t, func(t *testing.T) storekit.CheckpointStore {
		return newStore(t, postgres.Options{})
	})
}

func TestDeadLetters(t *testing.T) {
	storetest.RunDeadLetters(t, func(t *testing.T) storekit.DeadLetterStore {
		return newStore(t, postgres.Options{})
	})
}

func TestLeases(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storekit.LeaseStore {
		return newStore(t, postgres.Options{})
	})
}

func TestTxDeadLetters(t *testing.T) {
	storetest.RunTxDeadLetters(t, func(t *testing.T) storetest.TxDeadLetterStore[pgx.Tx] {
		return newStore(t, postgres.Options{})
	})
}

func TestTxLeases(t *testing.T) {
	storetest.RunTxLeases(t, func(t *testing.T) storetest.TxLeaseStore[pgx.Tx] {
		return newStore(t, postgres.Options{})
	})
}
