// Package counters is the read model that Cairn's own tests keep in a
// store's transactions: a counter per key, added to in the consumer's
// transaction and read back to count how often each event took effect. The
// store conformance tests (storetest.Run's projection part) and the
// projection package's tests and benchmarks share it. A test rig, not API.
package counters

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// AddMemory adds delta to counter key in a memory store's transaction.
func AddMemory(_ context.Context, tx *memory.Tx, key string, delta int64) error {
	n, err := parse(tx.Get(key))
	if err != nil {
		return err
	}
	tx.Put(key, strconv.AppendInt(nil, n+delta, 10))
	return nil
}

// Memory returns counter key of a memory store, as committed.
func Memory(t testing.TB, s *memory.Store, key string) int64 {
	n, err := parse(s.Value(key))
	if err != nil {
		t.Fatalf("counter %q: %v", key, err)
	}
	return n
}

func parse(v []byte, ok bool) (int64, error) {
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// SQLite keeps the counters in a table of each store's file. It reads them
// through a read-only connection of its own, as tests read them inside the
// consumer's transactions too, where going through the store's writer
// (InTx) would wait for itself.
type SQLite struct {
	mu      sync.Mutex
	readers map[*sqlite.Store]*sql.DB
}

// NewSQLite returns counters for the stores its Open opens.
func NewSQLite() *SQLite { return &SQLite{readers: make(map[*sqlite.Store]*sql.DB)} }

// Open opens the store in dir with its table of counters, closed when the
// test ends.
func (c *SQLite) Open(t testing.TB, dir string, opts sqlite.Options) *sqlite.Store {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), opts)
	if err != nil {
		t.Fatalf("open the store in %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatalf("create the counters of %s: %v", s.Path(), err)
	}
	db, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open a reader of %s: %v", s.Path(), err)
	}
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

// AddSQL adds delta to counter key in the store's transaction tx.
func AddSQL(ctx context.Context, tx *sql.Tx, key string, delta int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, key, delta)
	return err
}

// Get returns counter key of store s, which Open opened, as committed.
func (c *SQLite) Get(t testing.TB, s *sqlite.Store, key string) int64 {
	c.mu.Lock()
	db := c.readers[s]
	c.mu.Unlock()
	var n int64
	err := db.QueryRow(`SELECT n FROM counters WHERE key = ?`, key).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatalf("counter %q of %s: %v", key, s.Path(), err)
	}
	return n
}
