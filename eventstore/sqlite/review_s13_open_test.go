package sqlite

// Session thirteen's review of the optional type index (schema step 7,
// Options.TypeIndex): opening. Version-6 files, two opens at once, Close's
// checkpoint, ReadOnly, and a process killed while it builds the index.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

const s13ChildEnv = "CAIRN_REVIEW_S13_CHILD"

// Promise 2: version-6 files migrate, with and without TypeIndex, and with
// the index dropped by hand; events intact; index as asked.
func TestReviewS13MigrateFromV6(t *testing.T) {
	ctx := context.Background()
	for _, dropped := range []bool{false, true} {
		for _, ti := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "events.db")
			db := createAtVersion(t, path, 6)
			for i := range 30 {
				insertAsReleased(t, db, fmt.Sprintf("order-%d", i%3), i/3, uuid.New(), "")
			}
			_, err := db.Exec("UPDATE cairn_events SET type = 'other' WHERE position % 2 = 0")
			require.NoError(t, err)
			if dropped {
				_, err := db.Exec("DROP INDEX cairn_events_type")
				require.NoError(t, err)
			}
			require.NoError(t, db.Close())
			s := s13Open(t, path, Options{TypeIndex: ti})
			assert.Equal(t, ti, s.typeIndex, "dropped=%v ti=%v", dropped, ti)
			has, err := hasTypeIndex(ctx, s.readers)
			require.NoError(t, err)
			assert.Equal(t, ti, has)
			var v int
			require.NoError(t, s.readers.QueryRow("SELECT max(version) FROM cairn_schema").Scan(&v))
			assert.Equal(t, SchemaVersion, v)
			log := s13ReadAll(t, s, eventstore.Start, eventstore.Filter{})
			require.Len(t, log, 30)
			for _, f := range []eventstore.Filter{{Types: []string{"order.placed"}}, {Types: []string{"other", "order.placed"}}, {Types: []string{"other", "x"}, StreamPrefixes: []string{"order-1"}}} {
				require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13Pages(t, s, eventstore.Start, f, 4)))
			}
			require.NoError(t, s.Close())
		}
	}
}

// Promise 2: two Opens at once on the same path, one with TypeIndex and one
// without, on a new file and on a version-6 file. Both open and read right,
// including the one that saw no index after the other built it.
func TestReviewS13ConcurrentOpens(t *testing.T) {
	ctx := context.Background()
	for _, v6 := range []bool{false, true} {
		for round := range 6 {
			path := filepath.Join(t.TempDir(), "events.db")
			if v6 {
				db := createAtVersion(t, path, 6)
				for i := range 20 {
					insertAsReleased(t, db, "order-1", i, uuid.New(), "")
				}
				require.NoError(t, db.Close())
			}
			var wg sync.WaitGroup
			stores := make([]*Store, 2)
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					opts := Options{TypeIndex: (i+round)%2 == 0, BusyTimeout: 5 * time.Second, NoPolling: true}
					stores[i], errs[i] = Open(ctx, path, opts)
				}()
			}
			wg.Wait()
			for i := range 2 {
				require.NoError(t, errs[i], "v6=%v round %d store %d", v6, round, i)
				t.Cleanup(func() { _ = stores[i].Close() })
			}
			// Whoever opened second might have seen no index if it went first.
			_, err := stores[0].Append(ctx, "x-1", eventstore.Any,
				eventstore.EventData{ID: uuid.New(), Type: "a", Data: []byte("{}")},
				eventstore.EventData{ID: uuid.New(), Type: "b", Data: []byte("{}")},
				eventstore.EventData{ID: uuid.New(), Type: "c", Data: []byte("{}")})
			require.NoError(t, err)
			_, err = stores[1].Append(ctx, "x-2", eventstore.Any,
				eventstore.EventData{ID: uuid.New(), Type: "b", Data: []byte("{}")},
				eventstore.EventData{ID: uuid.New(), Type: "order.placed", Data: []byte("{}")})
			require.NoError(t, err)
			log := s13ReadAll(t, stores[0], eventstore.Start, eventstore.Filter{})
			for _, s := range stores {
				for _, f := range []eventstore.Filter{{Types: []string{"a", "b"}}, {Types: []string{"order.placed", "b", "c"}}, {Types: []string{"b"}, StreamPrefixes: []string{"x-"}}} {
					require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13Pages(t, s, eventstore.Start, f, 2)))
				}
			}
			has, err := hasTypeIndex(ctx, stores[0].readers)
			require.NoError(t, err)
			assert.True(t, has, "one of the two asked for the index")
		}
	}
}

// Promise 4: Close checkpoints the write-ahead log into the file when
// nothing else is open, with TypeIndex (building on an existing file) and
// without.
func TestReviewS13CloseCheckpoints(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"plain", "typeindex-new", "typeindex-existing", "readonly-after"} {
		path := filepath.Join(t.TempDir(), "events.db")
		if mode == "typeindex-existing" {
			s := s13Open(t, path, Options{})
			_, err := s.Append(ctx, "p-1", eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "a", Data: []byte("{}")})
			require.NoError(t, err)
			require.NoError(t, s.Close())
		}
		s := s13Open(t, path, Options{TypeIndex: mode != "plain"})
		for i := range 50 {
			_, err := s.Append(ctx, fmt.Sprintf("o-%d", i), eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "a", Data: []byte("{}")})
			require.NoError(t, err)
		}
		if mode == "readonly-after" {
			r := s13Open(t, path, Options{ReadOnly: true, TypeIndex: true})
			assert.True(t, r.typeIndex)
			require.NoError(t, r.Close())
		}
		require.NoError(t, s.Close())
		fi, err := os.Stat(path + "-wal")
		if err == nil {
			assert.Zero(t, fi.Size(), "%s: the -wal file holds %d bytes after Close", mode, fi.Size())
		}
		// The file alone (immutable: no -wal) holds every event.
		db, err := sql.Open("sqlite", fileURI(path, "mode=ro", "immutable=1"))
		require.NoError(t, err)
		var n int
		require.NoError(t, db.QueryRow("SELECT count(*) FROM cairn_events").Scan(&n), mode)
		var idx int
		require.NoError(t, db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'cairn_events_type'").Scan(&idx))
		require.NoError(t, db.Close())
		want := 50
		if mode == "typeindex-existing" {
			want = 51
		}
		assert.Equal(t, want, n, mode)
		assert.Equal(t, mode != "plain", idx == 1, mode)
	}
}

// Promise 5: ReadOnly with TypeIndex on a file without the index builds
// nothing and reads right, also after a writer builds the index.
func TestReviewS13ReadOnlyTypeIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	w := s13Open(t, path, Options{})
	for i := range 40 {
		_, err := w.Append(ctx, fmt.Sprintf("o-%d", i%4), eventstore.Any,
			eventstore.EventData{ID: uuid.New(), Type: []string{"a", "b", "c"}[i%3], Data: []byte("{}")})
		require.NoError(t, err)
	}
	r := s13Open(t, path, Options{ReadOnly: true, TypeIndex: true})
	assert.False(t, r.typeIndex)
	has, err := hasTypeIndex(ctx, w.readers)
	require.NoError(t, err)
	assert.False(t, has)
	log := s13ReadAll(t, w, eventstore.Start, eventstore.Filter{})
	f := eventstore.Filter{Types: []string{"a", "c"}, StreamPrefixes: []string{"o-1", "o-3"}}
	require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13Pages(t, r, eventstore.Start, f, 3)))
	w2 := s13Open(t, path, Options{TypeIndex: true})
	assert.True(t, w2.typeIndex)
	require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13Pages(t, r, eventstore.Start, f, 3)))
	r2 := s13Open(t, path, Options{ReadOnly: true})
	assert.True(t, r2.typeIndex)
	require.Equal(t, s13Pos(s13Want(log, eventstore.Start, f)), s13Pos(s13Pages(t, r2, eventstore.Start, f, 3)))
}

// Promise 2: a process killed (SIGKILL) while Open builds the index leaves
// the file intact: same events, a sound file, index either whole or absent.
func TestReviewS13KilledDuringBuild(t *testing.T) {
	race.Outside(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	db := createAtVersion(t, path, 7)
	_, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200000)
		INSERT INTO cairn_events (stream, version, id, type, schema_version, data, recorded_at)
		SELECT 's-' || (i % 1000), i / 1000, randomblob(16), 'type-' || hex(randomblob(10)), 1, X'7b7d', 1 FROM n`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	for _, delay := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReviewS13HelperChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), s13ChildEnv+"="+path)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		time.Sleep(delay)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("killed after %v: %q", delay, out.String())
		check, err := sql.Open("sqlite", fileURI(path, "mode=ro"))
		require.NoError(t, err)
		var ok string
		require.NoError(t, check.QueryRow("PRAGMA integrity_check").Scan(&ok))
		assert.Equal(t, "ok", ok)
		var n, v, idx int
		require.NoError(t, check.QueryRow("SELECT count(*) FROM cairn_events").Scan(&n))
		require.NoError(t, check.QueryRow("SELECT max(version) FROM cairn_schema").Scan(&v))
		require.NoError(t, check.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'cairn_events_type'").Scan(&idx))
		require.NoError(t, check.Close())
		assert.Equal(t, 200000, n)
		assert.Equal(t, 7, v)
		t.Logf("index present: %d", idx)
		if idx == 1 {
			break
		}
	}
	s := s13Open(t, path, Options{})
	page, err := s.readPage(ctx, eventstore.Start, eventstore.Filter{Types: []string{"x", "y"}}, 10)
	require.NoError(t, err)
	assert.Empty(t, page.Events)
}

// Child of TestReviewS13KilledDuringBuild: opens with TypeIndex.
func TestReviewS13HelperChild(t *testing.T) {
	path := os.Getenv(s13ChildEnv)
	if path == "" {
		t.Skip("runs only as the child of TestReviewS13KilledDuringBuild")
	}
	fmt.Println("opening")
	s, err := Open(context.Background(), path, Options{TypeIndex: true})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	fmt.Println("opened", s.typeIndex)
	s.Close()
}
