package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/internal/testrig/counters"
)

// TestConformance runs every suite on the store: the event store's, the
// consumer and aggregate contracts, and the command, saga and projection
// suites, the projections' read model a table of counters in the store's
// file, written in the consumer's transaction on the store's writer. The
// crash and two-process projection tests open one file from several
// processes.
//
// The command bus's hot-aggregate tests run smaller than on memory: under
// the race detector a SQLite read costs ~0.2ms per event, and the full
// size would take minutes of the project's test budget. For the same
// reason the one-outcome-under-contention test runs 100 rounds, not 200
// (8.7 s under the race detector on 2 cores at 200: every round appends
// durably).
func TestConformance(t *testing.T) {
	c := counters.NewSQLite()
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		return c.Open(t, t.TempDir(), sqlite.Options{})
	}, storetest.Options{
		ReadModel: storetest.TxReadModel(counters.AddSQL, func(t testing.TB, s eventstore.Store, key string) int64 {
			return c.Get(t, s.(*sqlite.Store), key)
		}),
		Open: func(t testing.TB, dir string) eventstore.Store {
			return c.Open(t, dir, sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
		},
		Commands: commandtest.Options{HotWorkers: 4, HotIncrements: 20, OutcomeRounds: 100},
	})
}

// openTemp opens a new store in a file of its own, closed when the test ends.
func openTemp(t testing.TB, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
