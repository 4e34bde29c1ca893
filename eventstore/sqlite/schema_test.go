package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storetest"
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
	db := createAtVersion(t, path, 1)
	insertAsReleased(t, db, "order-1", 0, uuid.New(), "")
	var tables int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'cairn_checkpoints'`).Scan(&tables))
	require.Zero(t, tables, "version 1 has no checkpoints table")
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{})
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

// createAtVersion creates a store file at schema version, as a release of
// that version created it, and returns a connection of its own to write
// rows as that release wrote them: Open would prepare this build's
// statements, which name columns the old schema lacks.
func createAtVersion(t *testing.T, path string, version int) *sql.DB {
	t.Helper()
	ctx := context.Background()
	saved := migrations
	migrations = saved[:version]
	defer func() { migrations = saved }()
	db, err := sql.Open("sqlite", fileURI(path))
	require.NoError(t, err)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	var mode string
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode))
	require.NoError(t, migrate(ctx, conn, path, false))
	require.NoError(t, conn.Close())
	return db
}

// insertAsReleased writes an event into cairn_events as every release up
// to schema version 5 wrote it.
func insertAsReleased(t *testing.T, db *sql.DB, stream string, version int, id uuid.UUID, commandID string) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO cairn_events (stream, version, id, type, schema_version, data,
		correlation_id, causation_id, command_id, extra, recorded_at) VALUES (?, ?, ?, 'order.placed', 1, X'7b7d', NULL, NULL, ?, NULL, 1)`,
		stream, version, id[:], nullable(commandID))
	require.NoError(t, err)
}

// A file of schema version 2 keyed its dead letters by (consumer, event_id,
// part). Opening it re-keys them by stream too, keeping every dead letter
// it holds; after that, the same event ID in another stream is a dead
// letter of its own.
func TestOpenMigratesDeadLettersToStreamKey(t *testing.T) {
	checkMigratedLetters(t, 2)
}

// A file of schema version 3 kept no generations of its dead letters:
// opening it gives each its first, finds it by its position, and lets a
// retry's compare-and-set update it.
func TestOpenMigratesDeadLetterGenerations(t *testing.T) {
	checkMigratedLetters(t, 3)
}

// A file of schema version 4 kept no claims of its dead letters: opening
// it leaves each unclaimed, and a retry can claim it.
func TestOpenMigratesDeadLetterClaims(t *testing.T) {
	checkMigratedLetters(t, 4)
}

// checkMigratedLetters writes two dead letters into a file at schema
// version, as that version wrote them, and checks that opening the file
// migrates them.
func checkMigratedLetters(t *testing.T, version int) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	db := createAtVersion(t, path, version)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	id := uuid.New()
	for i, letter := range []string{"01JNQ0000000000000000000A1", "01JNQ0000000000000000000A2"} {
		eventID := id
		if i == 1 {
			eventID = uuid.New()
		}
		_, err := db.Exec(`INSERT INTO cairn_dead_letters (consumer, event_id, part, id, position, minor, stream, version,
				type, schema_version, data, correlation_id, causation_id, command_id, extra, recorded_at, error, attempts,
				first_failure, last_failure)
			VALUES ('proj', ?, 0, ?, ?, 0, 'order-1', ?, 'order.placed', 1, X'7b7d', 'corr', NULL, NULL, '{"k":"v"}', ?, 'boom', 3, ?, ?)`,
			eventID[:], letter, 10+i, i, at.UnixNano(), at.UnixNano(), at.Add(time.Second).UnixNano())
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	var letters []eventstore.DeadLetter
	for d, err := range s.DeadLetters(ctx, "proj") {
		require.NoError(t, err)
		letters = append(letters, d)
	}
	require.Len(t, letters, 2, "the dead letters of version %d survive the migration", version)
	storetest.CheckMigratedDeadLetter(t, s, migratedLetter(id, at))
}

// migratedLetter is the first dead letter that the migration tests store
// in the schema of an older version, as it must read back.
func migratedLetter(id uuid.UUID, at time.Time) eventstore.DeadLetter {
	return eventstore.DeadLetter{ID: "01JNQ0000000000000000000A1", Consumer: "proj", Part: 0, Error: "boom", Attempts: 3,
		FirstFailure: at, LastFailure: at.Add(time.Second),
		Event: eventstore.Event{StreamID: "order-1", Version: 0, Position: eventstore.Position{Major: 10}, RecordedAt: at,
			EventData: eventstore.EventData{ID: id, Type: "order.placed", SchemaVersion: 1, Data: []byte("{}"),
				Metadata: eventstore.Metadata{CorrelationID: "corr", Extra: map[string]string{"k": "v"}}}}}
}
