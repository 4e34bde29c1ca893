package saga_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/saga/sagatest"
)

func TestConformanceOnMemory(t *testing.T) {
	sagatest.Run(t, func(t testing.TB) sagatest.Stores {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: memory.New()}
	})
}

func TestConformanceOnSQLite(t *testing.T) {
	sagatest.Run(t, func(t testing.TB) sagatest.Stores {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: s}
	})
}

func TestConformanceOnPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	sagatest.Run(t, func(t testing.TB) sagatest.Stores {
		s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "saga")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return sagatest.Stores{Events: s, Consumers: s}
	})
}
