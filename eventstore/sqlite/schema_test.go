package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

func TestSchemaVersionCountsMigrations(t *testing.T) {
	assert.Equal(t, SchemaVersion, len(migrations))
}

// A file at an older schema is migrated forward when opened, keeping its
// events, and each step is recorded.
func TestOpenMigratesForward(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, ev("a"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(migrations[:len(migrations):len(migrations)],
		migration{note: "a later feature", sql: `CREATE TABLE cairn_later (id INTEGER PRIMARY KEY) STRICT`})

	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	var versions []int
	rows, err := s.readers.Query(`SELECT version FROM cairn_schema ORDER BY version`)
	require.NoError(t, err)
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		versions = append(versions, v)
	}
	require.NoError(t, rows.Close())
	want := make([]int, SchemaVersion+1)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, versions)
	var n int
	require.NoError(t, s.readers.QueryRow(`SELECT count(*) FROM cairn_later`).Scan(&n))
	got := 0
	for _, err := range s.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		got++
	}
	assert.Equal(t, 1, got, "events survive the migration")

	// And the older version of the package now refuses the file.
	migrations = saved
	_, err = Open(ctx, path, Options{})
	var se *SchemaVersionError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, SchemaVersion+1, se.Found)
}

// A file written before the consumer and aggregate tables existed (schema
// version 1) gets them when opened, and keeps its events.
func TestOpenMigratesVersion1File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = saved[:1]
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, ev("a"))
	require.NoError(t, err)
	require.Error(t, s.SaveCheckpoint(ctx, "c", eventstore.Position{}, eventstore.Position{Major: 1}, 0),
		"version 1 has no checkpoints table")
	require.NoError(t, s.Close())

	migrations = saved
	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.SaveCheckpoint(ctx, "c", eventstore.Position{}, eventstore.Position{Major: 1}, 0))
	cp, err := s.Checkpoint(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, eventstore.Position{Major: 1}, cp.Position)
	n := 0
	for _, err := range s.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 1, n)
}
