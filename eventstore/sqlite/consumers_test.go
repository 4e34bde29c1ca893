package sqlite_test

import (
	"database/sql"
	"testing"

	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// The consumer and aggregate contracts, on a store of their own each, as
// the suites ask.
func TestSnapshotConformance(t *testing.T) {
	storetest.RunSnapshots(t, func(t *testing.T) storekit.SnapshotStore { return openTemp(t, sqlite.Options{}) })
}

func TestCommandIndexConformance(t *testing.T) {
	storetest.RunCommandIndex(t, func(t *testing.T) storetest.IndexedStore { return openTemp(t, sqlite.Options{}) })
}

func TestCheckpointConformance(t *testing.T) {
	storetest.RunCheckpoints(t, func(t *testing.T) storekit.CheckpointStore { return openTemp(t, sqlite.Options{}) })
}

func TestDeadLetterConformance(t *testing.T) {
	storetest.RunDeadLetters(t, func(t *testing.T) storekit.DeadLetterStore { return openTemp(t, sqlite.Options{}) })
}

func TestLeaseConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storekit.LeaseStore { return openTemp(t, sqlite.Options{}) })
}

func TestTxDeadLetterConformance(t *testing.T) {
	storetest.RunTxDeadLetters(t, func(t *testing.T) storetest.TxDeadLetterStore[*sql.Tx] { return openTemp(t, sqlite.Options{}) })
}

func TestTxLeaseConformance(t *testing.T) {
	storetest.RunTxLeases(t, func(t *testing.T) storetest.TxLeaseStore[*sql.Tx] { return openTemp(t, sqlite.Options{}) })
}
