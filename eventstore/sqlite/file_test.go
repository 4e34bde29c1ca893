package sqlite_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

func TestReopenKeepsEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	r, err := s.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"), event("order.paid"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	got := collect(t, s.ReadStream(ctx, "order-1", eventstore.Forward(0)))
	require.Len(t, got, 2)
	assert.Equal(t, r.Position, got[1].Position)
	r, err = s.Append(ctx, "order-1", eventstore.Exact(1), event("order.shipped"))
	require.NoError(t, err)
	assert.Equal(t, eventstore.Position{Major: 3}, r.Position, "positions continue densely after a reopen")
}

func TestEmptyFileBecomesAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A file that is not ours is refused, with a typed error, and left exactly
// as it was: no WAL switch, no tables, no side files.
func TestForeignFilesAreRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	random := filepath.Join(dir, "random.bin")
	noise := make([]byte, 8192)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(random, noise, 0o600))

	short := filepath.Join(dir, "short.txt")
	require.NoError(t, os.WriteFile(short, []byte("hello"), 0o600))

	other := filepath.Join(dir, "crm.db")
	db, err := sql.Open("sqlite", other)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	otherWAL := filepath.Join(dir, "wal.db")
	db, err = sql.Open("sqlite", otherWAL+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE events (id INTEGER PRIMARY KEY, body BLOB)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	for _, path := range []string{random, short, other, otherWAL} {
		before := dirState(t, dir)
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if s != nil {
			s.Close()
		}
		require.Error(t, err, path)
		require.ErrorIs(t, err, sqlite.ErrNotEventStore, path)
		var fe *sqlite.FileError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, path, fe.Path)
		assert.Contains(t, err.Error(), path, "the message names the file")
		assert.Equal(t, before, dirState(t, dir), "Open changed the directory while refusing %s", path)
	}
}

// A file written by a newer schema is refused, untouched.
func TestNewerSchemaIsRefusedUntouched(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO cairn_schema (version, note, applied_at) VALUES (?, 'from the future', 0)`, sqlite.SchemaVersion+1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	before := dirState(t, dir)
	_, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrNewerSchema)
	var se *sqlite.SchemaVersionError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, sqlite.SchemaVersion+1, se.Found)
	assert.Equal(t, sqlite.SchemaVersion, se.Supported)
	assert.Equal(t, before, dirState(t, dir))
}

// Rows that this package did not write give an error that names the event,
// not a panic and not a wrong event.
func TestUndecodableRowsAreCorrupt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	for _, stream := range []string{"bad-extra", "bad-id", "bad-version", "bad-type"} {
		_, err := s.Append(ctx, stream, eventstore.NoStream, event("x"))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, q := range []string{
		`UPDATE cairn_events SET extra = '{"broken' WHERE stream = 'bad-extra'`,
		`UPDATE cairn_events SET id = x'0102' WHERE stream = 'bad-id'`,
		`UPDATE cairn_events SET schema_version = -3 WHERE stream = 'bad-version'`,
		`UPDATE cairn_events SET type = CAST(x'00ff' AS BLOB) WHERE stream = 'bad-type'`,
	} {
		_, err := db.Exec(q)
		if err != nil {
			// STRICT tables refuse some damage; the rest must still be caught.
			t.Logf("%s: %v", q, err)
		}
	}
	require.NoError(t, db.Close())

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, stream := range []string{"bad-extra", "bad-id", "bad-version"} {
		var errs int
		for _, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			errs++
			require.ErrorIs(t, err, eventstore.ErrCorrupt, stream)
			var ce *sqlite.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, stream, ce.Stream)
			assert.Equal(t, uint64(0), ce.Version)
			assert.Contains(t, err.Error(), stream)
		}
		assert.Equal(t, 1, errs, "%s: one error, then the read ends", stream)
	}
	var err2 error
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			err2 = err
		}
	}
	require.ErrorIs(t, err2, eventstore.ErrCorrupt)
}

// dirState maps each file in dir to its contents.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	state := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		state[e.Name()] = string(b)
	}
	return state
}

func event(typ string) eventstore.EventData {
	return eventstore.EventData{Type: typ, SchemaVersion: 1, Data: []byte(`{"n":1}`)}
}

func collect(t *testing.T, seq func(func(eventstore.Event, error) bool)) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for e, err := range seq {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// A position with a Minor part (which this store never writes) sorts after
// {Major, 0} and before {Major+1, 0}: reading after it starts at Major+1.
func TestReadAfterPositionWithMinor(t *testing.T) {
	s := openTemp(t, sqlite.Options{})
	ctx := context.Background()
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, event("a"), event("b"), event("c"))
	require.NoError(t, err)
	got := collect(t, s.ReadAll(ctx, eventstore.Position{Major: 1, Minor: 7}, eventstore.Filter{}))
	require.Len(t, got, 2)
	assert.Equal(t, eventstore.Position{Major: 2}, got[0].Position)
}

// A file whose events table another program made without STRICT may hold
// any type in any column: metadata that is neither text nor NULL is an
// error naming its column and event, while NULL and empty text both read
// as no value.
func TestMetadataOfAnotherTypeIsCorrupt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	columns := []string{"correlation_id", "causation_id", "command_id"}
	for _, c := range append([]string{"fine"}, columns...) {
		e, f := event("x"), event("y")
		e.Metadata = eventstore.Metadata{CorrelationID: "c", CausationID: "d", CommandID: "e"}
		f.Metadata = e.Metadata
		_, err := s.Append(ctx, c, eventstore.NoStream, e, f)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	var table string
	require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'cairn_events'`).Scan(&table))
	loose, ok := strings.CutSuffix(strings.TrimSpace(table), "STRICT")
	require.True(t, ok, "the events table is STRICT: %s", table)
	for _, q := range []string{
		`ALTER TABLE cairn_events RENAME TO strict_events`,
		loose,
		`INSERT INTO cairn_events SELECT * FROM strict_events`,
		`DROP TABLE strict_events`,
		`UPDATE cairn_events SET correlation_id = '' WHERE stream = 'fine' AND version = 0`,
		`UPDATE cairn_events SET causation_id = NULL WHERE stream = 'fine' AND version = 0`,
		// Blobs: a TEXT column without STRICT turns numbers into text.
		`UPDATE cairn_events SET correlation_id = x'63' WHERE stream = 'correlation_id' AND version = 1`,
		`UPDATE cairn_events SET causation_id = x'00' WHERE stream = 'causation_id' AND version = 1`,
		`UPDATE cairn_events SET command_id = x'' WHERE stream = 'command_id' AND version = 1`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, db.Close())

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	fine := collect(t, s.ReadStream(ctx, "fine", eventstore.Forward(0)))
	require.Len(t, fine, 2)
	assert.Equal(t, eventstore.Metadata{CommandID: "e"}, fine[0].Metadata)
	assert.Equal(t, eventstore.Metadata{CorrelationID: "c", CausationID: "d", CommandID: "e"}, fine[1].Metadata)
	for _, column := range columns {
		var ce *sqlite.CorruptError
		for _, err := range s.ReadStream(ctx, column, eventstore.Forward(0)) {
			if err != nil {
				require.ErrorAs(t, err, &ce, column)
				break
			}
		}
		require.NotNil(t, ce, "%s of another type read without error", column)
		assert.Equal(t, column, ce.Field)
		assert.Equal(t, column, ce.Stream)
		assert.Equal(t, uint64(1), ce.Version)
	}
}
