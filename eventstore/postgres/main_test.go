package postgres_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// server is the one PostgreSQL server of this test binary; every store
// lives in a fresh schema on it.
var server *pgtest.Server

func TestMain(m *testing.M) {
	// Benchmarks measure a server with default durability; functional
	// tests run with fsync off, which makes no difference to what they check.
	os.Exit(pgtest.Main(m, pgtest.Options{Durable: pgtest.BenchmarksRequested()}, &server))
}

// newStore returns a store in a schema of its own, closed and dropped at
// cleanup.
func newStore(tb testing.TB, opts postgres.Options) *postgres.Store {
	tb.Helper()
	return newStoreAt(tb, server.URL, opts)
}

// newStoreAt is newStore with a connection string of its own.
func newStoreAt(tb testing.TB, connString string, opts postgres.Options) *postgres.Store {
	tb.Helper()
	if opts.Schema == "" {
		opts.Schema = server.NewSchema("test")
	}
	s, err := postgres.Open(context.Background(), connString, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		require.NoError(tb, s.Close())
		dropSchema(tb, opts.Schema)
	})
	return s
}

func dropSchema(tb testing.TB, schema string) {
	tb.Helper()
	ctx := context.Background()
	pool := newPoolOnce(tb)
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	require.NoError(tb, err)
}

// newPoolOnce returns a small pool for set-up and clean-up statements.
func newPoolOnce(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), server.URL)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool
}

// withPoolSize returns connString with pgxpool's pool_max_conns set.
func withPoolSize(connString string, n int) string {
	return withParam(connString, "pool_max_conns", strconv.Itoa(n))
}

// withParam returns connString with one more parameter, in URL or
// key=value form.
func withParam(connString, key, value string) string {
	switch {
	case !strings.Contains(connString, "://"):
		return connString + " " + key + "=" + value
	case strings.Contains(connString, "?"):
		return connString + "&" + key + "=" + value
	default:
		return connString + "?" + key + "=" + value
	}
}

// databaseURL is the examples' database: the test server, with schema
// dropped first so that an example also runs again on an existing server.
func databaseURL(schema string) string {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, server.URL)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
		panic(err)
	}
	return server.URL
}
