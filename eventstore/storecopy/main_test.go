package storecopy_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// server is the PostgreSQL server of this test binary; every store lives
// in a schema of its own on it.
var server *pgtest.Server

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// The copying child of TestCopyKilled needs no server of its own.
		os.Exit(m.Run())
	}
	os.Exit(pgtest.Main(m, pgtest.Options{Durable: pgtest.BenchmarksRequested()}, &server))
}

// newPostgres returns a store in a fresh schema, closed and dropped at
// cleanup.
func newPostgres(tb testing.TB) *postgres.Store {
	tb.Helper()
	schema := server.TempSchema(tb, "copy")
	s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: schema})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
