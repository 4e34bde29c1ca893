package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var server *Server

func TestMain(m *testing.M) {
	os.Exit(Main(m, Options{}, &server))
}

func TestServerAcceptsConnectionsWithRequestedDurability(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fsync string
	require.NoError(t, conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	if os.Getenv(URLEnv) == "" {
		assert.Equal(t, "off", fsync, "functional-test servers run without fsync")
	}
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	assert.Equal(t, 1, one)
}

func TestNewSchemaNamesDiffer(t *testing.T) {
	a, b := server.NewSchema("T"), server.NewSchema("T")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^t_[0-9a-f]{12}$`, a)
}

func TestBenchmarksRequestedReadsTheBenchFlag(t *testing.T) {
	assert.False(t, BenchmarksRequested(), "go test without -bench")
}
