package projection_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// sqliteHarness is the projection suite's harness on the SQLite store, for
// the benchmarks (storetest.Run runs the suite itself on each store): events,
// checkpoints, dead letters, leases and the read model (a table of
// counters) in one file, the read model written in the consumer's
// transaction on the store's writer. The crash and two-process tests open
// the file of a directory from several processes.
//
// Get reads the counters through a read-only connection of its own: the
// suite calls it inside the consumer's transactions too, where going
// through the store's writer (InTx) would wait for itself.
func sqliteHarness() projectiontest.Harness[*sql.Tx] {
	var mu sync.Mutex
	readers := make(map[*sqlite.Store]*sql.DB)
	open := func(t testing.TB, dir string) projectiontest.Stores[*sql.Tx] {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"),
			sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
			return err
		}))
		db, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro&_pragma=busy_timeout(10000)")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		mu.Lock()
		readers[s] = db
		mu.Unlock()
		return projectiontest.Stores[*sql.Tx]{Events: s, Consumers: s}
	}
	return projectiontest.Harness[*sql.Tx]{
		New:  func(t testing.TB) projectiontest.Stores[*sql.Tx] { return open(t, t.TempDir()) },
		Open: open,
		Add: func(ctx context.Context, tx *sql.Tx, key string, delta int64) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, ?)
				ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, key, delta)
			return err
		},
		Get: func(t testing.TB, st projectiontest.Stores[*sql.Tx], key string) int64 {
			mu.Lock()
			db := readers[st.Events.(*sqlite.Store)]
			mu.Unlock()
			var n int64
			err := db.QueryRow(`SELECT n FROM counters WHERE key = ?`, key).Scan(&n)
			if errors.Is(err, sql.ErrNoRows) {
				return 0
			}
			require.NoError(t, err)
			return n
		},
	}
}
