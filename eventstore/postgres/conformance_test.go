package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// TestConformance runs every suite on the store, each test in a fresh
// schema: the event store's, the consumer and aggregate contracts, and the
// command, saga and projection suites, the projections' read model a table
// of counters in the store's schema, written in the consumer's
// transaction. The crash and two-process projection tests run too: their
// child processes reach this server through CAIRN_POSTGRES_URL, and find
// the store of a directory in a schema named after it.
//
// The command bus's hot-aggregate tests run at 16 x 50 (two buses racing
// for one counter): at the full 32 x 100 they take 38 s under the race
// detector on 2 cores, at this size 12 s.
func TestConformance(t *testing.T) {
	// Children inherit the environment: they use this server, not one of
	// their own.
	t.Setenv(pgtest.URLEnv, server.URL)
	storetest.Run(t, func(t testing.TB) eventstore.Store {
		schema := server.NewSchema("test")
		return withCounters(t, newStoreAt(t, withSearchPath(schema), postgres.Options{Schema: schema}))
	}, storetest.Options{
		ReadModel: storetest.TxReadModel(addCounter, counter),
		Open:      openDir,
		Commands:  commandtest.Options{HotWorkers: 16, HotIncrements: 50},
	})
}

// withCounters creates the read model's table of counters in s's schema.
func withCounters(t testing.TB, s *postgres.Store) *postgres.Store {
	_, err := s.Pool().Exec(context.Background(), `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{s.Schema(), "counters"}.Sanitize()+
		` (key text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(t, err)
	return s
}

// openDir opens the store of dir: a schema named after it, whose first
// opener (the parent process) drops it at its end; the children leave it
// alone.
func openDir(t testing.TB, dir string) eventstore.Store {
	sum := sha256.Sum256([]byte(dir))
	schema := "storedir_" + hex.EncodeToString(sum[:8])
	f, err := os.OpenFile(filepath.Join(dir, "postgres-schema-owner"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	owner := err == nil
	if owner {
		_ = f.Close()
	}
	s, err := postgres.Open(context.Background(), withSearchPath(schema),
		postgres.Options{Schema: schema, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Close()
		if owner {
			dropSchema(t, schema)
		}
	})
	return withCounters(t, s)
}

// withSearchPath is the server's connection string with schema as the
// search_path of its sessions, where the read model's statements find
// their table.
func withSearchPath(schema string) string { return withParam(server.URL, "search_path", schema) }

func addCounter(ctx context.Context, tx pgx.Tx, key string, delta int64) error {
	// Unqualified: each store's connections have its schema as their
	// search_path.
	_, err := tx.Exec(ctx, `INSERT INTO counters AS c (key, n) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET n = c.n + excluded.n`, key, delta)
	return err
}

func counter(t testing.TB, st eventstore.Store, key string) int64 {
	s := st.(*postgres.Store)
	var n int64
	err := s.Pool().QueryRow(context.Background(), `SELECT n FROM `+pgx.Identifier{s.Schema(), "counters"}.Sanitize()+
		` WHERE key = $1`, key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	require.NoError(t, err)
	return n
}
