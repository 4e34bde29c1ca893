package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// A file of schema version 6 has the type index. Opening it drops the
// index unless Options.TypeIndex asks for it; with the option, Open builds
// it, later opens without the option keep it and read by it, and a
// read-only open builds nothing.
func TestOpenMigratesTheTypeIndex(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, path string, opts Options) *Store {
		t.Helper()
		s, err := Open(ctx, path, opts)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	indexed := func(t *testing.T, path string) bool {
		t.Helper()
		s := open(t, path, Options{ReadOnly: true})
		has, err := hasTypeIndex(ctx, s.readers)
		require.NoError(t, err)
		require.Equal(t, has, s.typeIndex)
		return has
	}
	old := func(t *testing.T, dropped bool) string {
		path := filepath.Join(t.TempDir(), "events.db")
		db := createAtVersion(t, path, 6)
		insertAsReleased(t, db, "order-1", 0, uuid.New(), "")
		if dropped {
			_, err := db.Exec("DROP INDEX cairn_events_type")
			require.NoError(t, err)
		}
		require.NoError(t, db.Close())
		return path
	}
	readTypes := func(t *testing.T, s *Store) int {
		n := 0
		for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{Types: []string{"order.placed", "x"}}) {
			require.NoError(t, err)
			n++
		}
		return n
	}

	t.Run("dropped", func(t *testing.T) {
		path := old(t, false)
		s := open(t, path, Options{})
		assert.False(t, s.typeIndex)
		assert.Equal(t, 1, readTypes(t, s))
		assert.False(t, indexed(t, path))
	})
	t.Run("kept", func(t *testing.T) {
		path := old(t, false)
		s := open(t, path, Options{TypeIndex: true})
		assert.True(t, s.typeIndex)
		assert.Equal(t, 1, readTypes(t, s))
		assert.True(t, open(t, path, Options{}).typeIndex, "an open without the option keeps the index")
	})
	t.Run("dropped by hand before", func(t *testing.T) {
		path := old(t, true)
		assert.Equal(t, 1, readTypes(t, open(t, path, Options{})))
		assert.False(t, indexed(t, path))
	})
	t.Run("read-only", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "events.db")
		open(t, path, Options{})
		s := open(t, path, Options{ReadOnly: true, TypeIndex: true})
		assert.False(t, s.typeIndex)
		assert.False(t, indexed(t, path))
		open(t, path, Options{TypeIndex: true})
		assert.True(t, indexed(t, path), "a writable open builds the index of an existing file")
	})
}

// Filtered reads return the same events, page by page, whether or not the
// file has the type index: every shape of pageQuery against Filter.Match
// over the whole log, from positions across it, in pages of several sizes.
// The log holds more of its common types than a statement's LIMIT, so that
// a merge that cut or ordered its candidates wrongly shows.
func TestFilteredReadsAgreeWithAndWithoutTypeIndex(t *testing.T) {
	race.Outside(t)
	ctx := context.Background()
	// A third of the events are of type a, the others grow rarer down
	// s13Types (review_s13_reads_test.go).
	stores, log := s13TwoStores(t, 1600, 28)
	rng := rand.New(rand.NewPCG(28, 13))
	filters := []eventstore.Filter{{Types: []string{"a"}}, {Types: []string{"A"}}, {Types: []string{"zz"}},
		{Types: []string{"a", "A"}}, {Types: []string{"c", "b", "c"}}, {Types: s13Types[:8]}, {Types: s13Types},
		{Types: []string{"b", "it's"}, StreamPrefixes: []string{"order-1"}}, {Types: []string{"a"}, StreamPrefixes: []string{"ü", "orders-"}}}
	afters := []uint64{0, 1, 2, uint64(len(log) - 1), uint64(len(log))}
	for range 12 {
		afters = append(afters, rng.Uint64N(uint64(len(log))))
	}
	for _, f := range filters {
		for _, limit := range []int{1, 3, 512} {
			from := afters
			if limit == 512 {
				from = afters[:5] // whole pages cost the race detector most
			}
			for _, after := range from {
				var want []eventstore.Event
				for _, e := range log {
					if e.Position.Major > after && f.Match(&e) {
						want = append(want, e)
					}
				}
				if len(want) > limit {
					want = want[:limit]
				}
				for _, s := range stores {
					page, err := s.readPage(ctx, eventstore.Position{Major: after}, f, limit)
					require.NoError(t, err)
					require.Equal(t, positions(want), positions(page.Events),
						"filter %+v after %d, pages of %d, type index %v", f, after, limit, s.typeIndex)
					require.Equal(t, len(want) == limit, page.Full)
				}
			}
		}
	}
}

func positions(events []eventstore.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%d %s %s", e.Position.Major, e.StreamID, e.Type)
	}
	return out
}

// A type index that cannot be built (the disk fills up) fails Open with a
// typed error naming the file, and the transaction that migrated the file
// rolls back whole: the file stays at its version, without the index, and
// opens later.
func TestFailedTypeIndexBuildLeavesTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	db := createAtVersion(t, path, 6)
	_, err := db.Exec("DROP INDEX cairn_events_type") // so that building it needs pages the file does not have
	require.NoError(t, err)
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000)
		INSERT INTO cairn_events (stream, version, id, type, schema_version, data, recorded_at)
		SELECT 's-' || i, 0, randomblob(16), 'type-' || hex(randomblob(40)), 1, X'7b7d', 1 FROM n`)
	require.NoError(t, err)
	_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	var pages int
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	_, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+2)) // room for no index
	require.NoError(t, err)

	err = classify(path, migrate(ctx, conn, path, true))
	var fe *FileError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, ErrIO)
	assert.ErrorIs(t, err, eventstore.ErrUnavailable)
	assert.Contains(t, err.Error(), path)
	require.NoError(t, conn.Close())
	var version int
	require.NoError(t, db.QueryRow("SELECT max(version) FROM cairn_schema").Scan(&version))
	assert.Equal(t, 6, version, "the migration rolled back")
	has, err := hasTypeIndex(ctx, db)
	require.NoError(t, err)
	assert.False(t, has)
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{TypeIndex: true})
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, s.typeIndex)
}
