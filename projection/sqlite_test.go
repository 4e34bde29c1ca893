package projection_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/counters"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// sqliteHarness is the projection suite's harness on the SQLite store, for
// the benchmarks (storetest.Run runs the suite itself on each store):
// events, checkpoints, dead letters, leases and the read model (a table of
// counters) in one file, the read model written in the consumer's
// transaction on the store's writer.
func sqliteHarness() projectiontest.Harness[*sql.Tx] {
	c := counters.NewSQLite()
	open := func(t testing.TB, dir string) projectiontest.Stores[*sql.Tx] {
		s := c.Open(t, dir, sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
		return projectiontest.Stores[*sql.Tx]{Events: s, Consumers: s}
	}
	return projectiontest.Harness[*sql.Tx]{
		New:  func(t testing.TB) projectiontest.Stores[*sql.Tx] { return open(t, t.TempDir()) },
		Open: open,
		Add:  counters.AddSQL,
		Get: func(t testing.TB, st projectiontest.Stores[*sql.Tx], key string) int64 {
			return c.Get(t, st.Events.(*sqlite.Store), key)
		},
	}
}
