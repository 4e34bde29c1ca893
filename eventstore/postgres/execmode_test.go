package postgres_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// The store works whatever query mode the caller's pool runs in: pgx
// encodes parameters differently when statements are not prepared (exec)
// or go as text (simple protocol, as behind PgBouncer in transaction mode).
func TestQueryModes(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			open := func(t *testing.T) *postgres.Store {
				return newStoreAt(t, withParam(server.URL, "default_query_exec_mode", mode), postgres.Options{})
			}
			storetest.Run(t, func(t *testing.T) eventstore.Store { return open(t) })
			storetest.RunSnapshots(t, func(t *testing.T) storekit.SnapshotStore { return open(t) })
			storetest.RunCheckpoints(t, func(t *testing.T) storekit.CheckpointStore { return open(t) })
			storetest.RunDeadLetters(t, func(t *testing.T) storekit.DeadLetterStore { return open(t) })
			storetest.RunLeases(t, func(t *testing.T) storekit.LeaseStore { return open(t) })
		})
	}
}
