package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// TestMigratesFromVersion1 opens a schema as the first release left it
// (events only) and checks that the store adds the consumer tables and the
// command index, keeping the events.
func TestMigratesFromVersion1(t *testing.T) {
	ctx := context.Background()
	schema := server.NewSchema("migrate")
	s := newStore(t, postgres.Options{Schema: schema})
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte("{}"),
		Metadata: eventstore.Metadata{CommandID: "c1"}})
	require.NoError(t, err)
	q := pgx.Identifier{schema}.Sanitize()
	_, err = s.Pool().Exec(ctx, `DROP TABLE `+q+`.snapshots, `+q+`.checkpoints, `+q+`.dead_letters, `+q+`.leases;
		DROP INDEX `+q+`.events_stream_command;
		DELETE FROM `+q+`.schema_version WHERE version > 1`)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s2, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer s2.Close()
	var version int
	require.NoError(t, s2.Pool().QueryRow(ctx, `SELECT max(version) FROM `+q+`.schema_version`).Scan(&version))
	assert.Equal(t, postgres.SchemaVersion, version)
	r, found, err := s2.CommandResult(ctx, "order-1", "c1")
	require.NoError(t, err)
	require.True(t, found, "the event of the first release is found by its command")
	assert.Equal(t, uint64(0), r.LastVersion)
	require.NoError(t, s2.SaveCheckpoint(ctx, "c", eventstore.Start, r.Position, 0))
	_, ok, err := s2.AcquireLease(ctx, "c", "me", time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}
