package projection_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// TestPostgresProjections runs the projection suite on the PostgreSQL
// store, its read model a table of counters in the store's schema, written
// in the consumer's transaction. The crash and two-process tests run too:
// their child processes reach the parent's server through
// CAIRN_POSTGRES_URL, and find the stores of a directory in a schema named
// after it.
func TestPostgresProjections(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	// Children inherit the environment: they use this server, not one of
	// their own.
	t.Setenv(pgtest.URLEnv, server.URL)

	open := func(t testing.TB, schema string, owner bool) projectiontest.Stores[pgx.Tx] {
		ctx := context.Background()
		s, err := postgres.Open(ctx, withSearchPath(server.URL, schema), postgres.Options{Schema: schema, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		_, err = s.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{schema, "counters"}.Sanitize()+
			` (key text PRIMARY KEY, n bigint NOT NULL)`)
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = s.Close()
			if owner {
				dropSchema(t, server.URL, schema)
			}
		})
		return projectiontest.Stores[pgx.Tx]{Events: s, Consumers: s}
	}
	projectiontest.Run(t, projectiontest.Harness[pgx.Tx]{
		New: func(t testing.TB) projectiontest.Stores[pgx.Tx] {
			return open(t, server.NewSchema("proj"), true)
		},
		Open: func(t testing.TB, dir string) projectiontest.Stores[pgx.Tx] {
			sum := sha256.Sum256([]byte(dir))
			// The first process to open dir (the parent) owns the schema and
			// drops it at its end; the children leave it alone.
			f, err := os.OpenFile(filepath.Join(dir, "postgres-schema-owner"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			owner := err == nil
			if owner {
				_ = f.Close()
			}
			return open(t, "projdir_"+hex.EncodeToString(sum[:8]), owner)
		},
		Add: func(ctx context.Context, tx pgx.Tx, key string, delta int64) error {
			// Unqualified: each store's connections have its schema as their
			// search_path.
			_, err := tx.Exec(ctx, `INSERT INTO counters AS c (key, n) VALUES ($1, $2)
				ON CONFLICT (key) DO UPDATE SET n = c.n + excluded.n`, key, delta)
			return err
		},
		Get: func(t testing.TB, st projectiontest.Stores[pgx.Tx], key string) int64 {
			s := st.Events.(*postgres.Store)
			var n int64
			err := s.Pool().QueryRow(context.Background(), `SELECT n FROM `+pgx.Identifier{s.Schema(), "counters"}.Sanitize()+
				` WHERE key = $1`, key).Scan(&n)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0
			}
			require.NoError(t, err)
			return n
		},
	})
}

// withSearchPath returns the URL connString with the search_path of its
// sessions set to schema.
func withSearchPath(connString, schema string) string {
	sep := "?"
	if strings.Contains(connString, "?") {
		sep = "&"
	}
	return connString + sep + "search_path=" + url.QueryEscape(schema)
}

func dropSchema(t testing.TB, connString, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	require.NoError(t, err)
}
