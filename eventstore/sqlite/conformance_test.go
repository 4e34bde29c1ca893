package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
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
	counters := newCounters()
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		return counters.open(t, t.TempDir(), sqlite.Options{})
	}, storetest.Options{
		ReadModel: storetest.TxReadModel(addCounter, counters.get),
		Open: func(t testing.TB, dir string) eventstore.Store {
			return counters.open(t, dir, sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
		},
		Commands: commandtest.Options{HotWorkers: 4, HotIncrements: 20, OutcomeRounds: 100},
	})
}

// counters is the projection suite's read model: a table of counters in
// each store's file, read through a read-only connection of its own, as
// the suite reads it inside the consumer's transactions too, where going
// through the store's writer (InTx) would wait for itself.
type counters struct {
	mu      sync.Mutex
	readers map[*sqlite.Store]*sql.DB
}

func newCounters() *counters {
	return &counters{readers: make(map[*sqlite.Store]*sql.DB)}
}

// open opens the store in dir with its table of counters.
func (c *counters) open(t testing.TB, dir string, opts sqlite.Options) *sqlite.Store {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
		return err
	}))
	db, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro&_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = db.Close()
		c.mu.Lock()
		delete(c.readers, s)
		c.mu.Unlock()
	})
	c.mu.Lock()
	c.readers[s] = db
	c.mu.Unlock()
	return s
}

func addCounter(ctx context.Context, tx *sql.Tx, key string, delta int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, key, delta)
	return err
}

func (c *counters) get(t testing.TB, s eventstore.Store, key string) int64 {
	c.mu.Lock()
	db := c.readers[s.(*sqlite.Store)]
	c.mu.Unlock()
	var n int64
	err := db.QueryRow(`SELECT n FROM counters WHERE key = ?`, key).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// openTemp opens a new store in a file of its own, closed when the test ends.
func openTemp(t testing.TB, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
