package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// damagedStore writes enough events that the events table spans many pages,
// closes the store, overwrites pages in the middle of the file (as a bad
// disk sector would) and opens it again. Open only reads the first pages,
// so it succeeds; the damage shows when a read reaches it.
func damagedStore(t *testing.T) (*sqlite.Store, []string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	var streams []string
	data := []byte(`{"note":"` + strings.Repeat("x", 400) + `"}`)
	for i := range 40 {
		stream := fmt.Sprintf("order-%d", i)
		streams = append(streams, stream)
		batch := make([]eventstore.EventData, 50)
		for j := range batch {
			batch[j] = eventstore.EventData{Type: "order.noted", SchemaVersion: 1, Data: data}
		}
		_, err := s.Append(ctx, stream, eventstore.NoStream, batch...)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close()) // checkpoints the WAL into the file

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	const page = 4096
	pages := fi.Size() / page
	require.Greater(t, pages, int64(100), "the events must span many pages")
	junk := []byte(strings.Repeat("\xa5\x5a", page/2))
	for p := pages * 2 / 5; p < pages*3/5; p++ {
		_, err := f.WriteAt(junk, p*page)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err, "Open reads only the first pages, which are whole")
	t.Cleanup(func() { s.Close() })
	return s, streams
}

// A damaged page surfaces as an error matching eventstore.ErrCorrupt that
// names the file and the read, never as SQLite's bare "database disk image
// is malformed", and never as a panic.
func TestDamagedPagesAreCorrupt(t *testing.T) {
	s, streams := damagedStore(t)
	ctx := context.Background()

	var readAllErr error
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			readAllErr = err
		}
	}
	requireDamaged(t, s, readAllErr, "read all")

	damaged := 0
	for _, stream := range streams {
		for _, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			if err != nil {
				damaged++
				requireDamaged(t, s, err, stream)
			}
		}
	}
	assert.Positive(t, damaged, "some stream lies on the damaged pages")

	var filteredErr error
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{"order.noted", "order.other"}}) {
		if err != nil {
			filteredErr = err
		}
	}
	requireDamaged(t, s, filteredErr, "read all")
}

// Writes that reach a damaged page fail alike.
func TestDamagedPagesFailWrites(t *testing.T) {
	s, streams := damagedStore(t)
	ctx := context.Background()
	failed := 0
	for _, stream := range streams {
		_, err := s.Append(ctx, stream, eventstore.Any, event("order.noted"))
		if err != nil {
			failed++
			requireDamaged(t, s, err, stream)
		}
	}
	assert.Positive(t, failed, "some append reads the damaged pages")
}

func requireDamaged(t *testing.T, s *sqlite.Store, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, eventstore.ErrCorrupt)
	assert.Contains(t, err.Error(), s.Path(), "the message names the file")
	assert.Contains(t, err.Error(), what)
	if fe := (*sqlite.FileError)(nil); assert.ErrorAs(t, err, &fe) {
		assert.Equal(t, s.Path(), fe.Path)
	}
}
