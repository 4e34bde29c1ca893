package command_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The suite finds these capabilities on the store it is given: snapshots
// and the command index live in the store's own file.
var (
	_ storekit.SnapshotStore = (*sqlite.Store)(nil)
	_ storekit.CommandIndex  = (*sqlite.Store)(nil)
)

// TestBusOnSQLite runs the suite on the embedded store, durable as by
// default, so that the bus is known to hold on a store with real
// transactions, with the store's own snapshots and command index. The
// hot-aggregate tests run smaller than on memory: under
// the race detector a SQLite read costs ~0.2ms per event, and the full size
// would take minutes of the project's test budget. For the same reason the
// one-outcome-under-contention test runs 100 rounds, not 200 (8.7 s under
// the race detector on 2 cores at 200: every round appends durably).
func TestBusOnSQLite(t *testing.T) {
	commandtest.RunWith(t, func(t testing.TB) eventstore.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, commandtest.Options{HotWorkers: 4, HotIncrements: 20, OutcomeRounds: 100})
}
