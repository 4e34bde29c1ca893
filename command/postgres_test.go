package command_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// TestBusOnPostgres runs the bus suite on the PostgreSQL store, with its
// own snapshots and command index, each test in a fresh schema. The
// hot-aggregate tests run at 16 workers x 50 increments (800 commands on one
// counter through two buses): at the full 32 x 100 they take 38 s under the
// race detector on 2 cores, at this size 12 s, still with two buses racing
// for one counter.
func TestBusOnPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	commandtest.RunWith(t, func(t testing.TB) eventstore.Store {
		s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "bus")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, commandtest.Options{HotWorkers: 16, HotIncrements: 50})
}
