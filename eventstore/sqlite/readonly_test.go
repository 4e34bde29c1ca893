package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// writes lists every kind of write of a Store, by name.
func writes(s *sqlite.Store) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Append": func(ctx context.Context) error {
			_, err := s.Append(ctx, "order-9", eventstore.Any, event("order.placed"))
			return err
		},
		"SaveCheckpoint": func(ctx context.Context) error {
			return s.SaveCheckpoint(ctx, "totals", eventstore.Start, eventstore.Position{Major: 1}, 0)
		},
		"SaveSnapshot": func(ctx context.Context) error {
			return s.SaveSnapshot(ctx, storekit.Snapshot{Stream: "order-1", Type: "order", SchemaVersion: 1, Data: []byte(`{}`)})
		},
		"AcquireLease": func(ctx context.Context) error {
			_, _, err := s.AcquireLease(ctx, "totals", "me", time.Minute)
			return err
		},
		"DeleteDeadLetter": func(ctx context.Context) error {
			return s.DeleteDeadLetter(ctx, "totals", "01JBKZ8J9R0000000000000000")
		},
		"InTx": func(ctx context.Context) error {
			return s.InTx(ctx, func(context.Context, *sql.Tx) error { return nil })
		},
	}
}

// reads lists every kind of read of a Store, by name.
func reads(s *sqlite.Store) map[string]func(ctx context.Context) error {
	first := func(seq func(func(eventstore.Event, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	return map[string]func(ctx context.Context) error{
		"ReadStream": func(ctx context.Context) error {
			return first(s.ReadStream(ctx, "order-1", eventstore.Forward(0)))
		},
		"ReadAll": func(ctx context.Context) error {
			return first(s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}))
		},
		"Subscribe": func(ctx context.Context) error {
			return first(s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}))
		},
		"Checkpoint": func(ctx context.Context) error {
			_, err := s.Checkpoint(ctx, "totals")
			return err
		},
		"LoadSnapshot": func(ctx context.Context) error {
			_, _, err := s.LoadSnapshot(ctx, "order-1")
			return err
		},
		"CountDeadLetters": func(ctx context.Context) error {
			_, err := s.CountDeadLetters(ctx, "totals")
			return err
		},
		"CommandResult": func(ctx context.Context) error {
			_, _, err := s.CommandResult(ctx, "order-1", "cmd-1")
			return err
		},
	}
}

// A store opened with Options.ReadOnly reads, follows another process's
// appends, and refuses every write with a typed error naming the file,
// leaving the file as it was. This runs as root too: the refusal is the
// store's, not the file system's.
func TestReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	newStoreFile(t, path)

	before := dirState(t, dir)
	r, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	got := collect(t, r.ReadStream(ctx, "order-1", eventstore.Forward(0)))
	require.Len(t, got, 1)
	for name, write := range writes(r) {
		err := write(ctx)
		require.ErrorIs(t, err, sqlite.ErrReadOnly, name)
		var fe *sqlite.FileError
		require.ErrorAs(t, err, &fe, name)
		assert.Equal(t, path, fe.Path, name)
		assert.Contains(t, err.Error(), path, name)
	}
	require.NoError(t, r.Close())
	// Reading a WAL-mode file may leave SQLite's empty -wal and -shm files
	// beside it; the store's file itself is as it was.
	assert.Equal(t, before["events.db"], dirState(t, dir)["events.db"], "a read-only store changed the file")

	// A writer in the same folder appends; the reader follows.
	w, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer w.Close()
	r, err = sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer r.Close()
	subCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = w.Append(ctx, "order-2", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err)
	n := 0
	for e, err := range r.Subscribe(subCtx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		n++
		if e.StreamID == "order-2" {
			break
		}
	}
	assert.Equal(t, 2, n)
}

// Options.ReadOnly cannot create or migrate a store: it refuses a file that
// is not one yet, by name.
func TestReadOnlyRefusesAFileWithoutAStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	before := dirState(t, dir)
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: true})
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "schema version 0")
	assert.Equal(t, before, dirState(t, dir))
}

// After Close, every read and write returns eventstore.ErrClosed, on a
// writable store and on a read-only one.
func TestClosedStoreRefusesEverything(t *testing.T) {
	ctx := context.Background()
	for _, readOnly := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "events.db")
		w, err := sqlite.Open(ctx, path, sqlite.Options{})
		require.NoError(t, err)
		require.NoError(t, w.Close())
		s, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: readOnly})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		for name, f := range writes(s) {
			assert.ErrorIs(t, f(ctx), eventstore.ErrClosed, "%s (read-only %v)", name, readOnly)
		}
		for name, f := range reads(s) {
			assert.ErrorIs(t, f(ctx), eventstore.ErrClosed, "%s (read-only %v)", name, readOnly)
		}
	}
}

// newStoreFile creates a store with one event in path.
func newStoreFile(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.NoStream, event("order.placed"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
