package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The reads that matter are index lookups or ordered index scans, never a
// scan of the whole log or of a whole stream; without the type index, a
// filtered read scans the log in position order from where it starts.
func TestQueryPlansUseIndexes(t *testing.T) {
	for _, typeIndex := range []bool{false, true} {
		t.Run(fmt.Sprintf("type index %v", typeIndex), func(t *testing.T) { checkQueryPlans(t, typeIndex) })
	}
}

func checkQueryPlans(t *testing.T, typeIndex bool) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), Options{TypeIndex: typeIndex})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Equal(t, typeIndex, s.typeIndex)
	plan := func(query string, args ...any) string {
		rows, err := s.readers.Query("EXPLAIN QUERY PLAN "+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var steps []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			steps = append(steps, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(steps, "; ")
	}
	one := eventstore.EventData{ID: eventstore.NewEventID()}
	stateQ, stateArgs := stateQuery("order-1", []eventstore.EventData{one, one})
	typeQ, typeArgs := pageQuery(eventstore.Start, eventstore.Filter{Types: []string{"a"}}, 10, typeIndex)
	typesQ, typesArgs := pageQuery(eventstore.Start, eventstore.Filter{Types: []string{"a", "b"}}, 10, typeIndex)
	prefixQ, prefixArgs := pageQuery(eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"order-"}}, 10, typeIndex)
	byType, byTypes := "USING INTEGER PRIMARY KEY (rowid>?)", "USING INTEGER PRIMARY KEY (rowid>?)"
	if typeIndex {
		// Several types are merged by position from the index alone.
		byType, byTypes = "USING INDEX cairn_events_type (type=? AND rowid>?)", "USING COVERING INDEX cairn_events_type (type=? AND rowid>?)"
	}
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"command", sqlCommandIndexed, []any{"s", "c"}, "USING INDEX cairn_events_command (stream=? AND command_id=?)"},
		{"bus command", sqlCommandDerived, []any{"s", "c", one.ID[:]}, "USING INDEX cairn_events_id (id=?)"},
		{"bus command's events", sqlCommandDerived, []any{"s", "c", one.ID[:]}, "USING INDEX cairn_events_stream_version (stream=? AND version>?)"},
		{"append state", stateQ, stateArgs, "USING INDEX cairn_events_id (id=?)"},
		{"stream forward", streamQuery(false, 10), []any{"s", 0}, "USING INDEX cairn_events_stream_version (stream=? AND version>?)"},
		{"one type", typeQ, typeArgs, byType},
		{"two types", typesQ, typesArgs, byTypes},
		{"prefix", prefixQ, prefixArgs, "USING INTEGER PRIMARY KEY (rowid>?)"},
	} {
		got := plan(c.query, c.args...)
		assert.Contains(t, got, c.want, c.name)
		if c.name == "one type" || c.name == "prefix" || (c.name == "two types" && !typeIndex) {
			assert.NotContains(t, got, "TEMP B-TREE", "%s: pages must not sort the whole match", c.name)
		}
	}
}

// busNamed returns n events of command id in stream, named as the command
// bus names them.
func busNamed(stream, id string, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: storekit.CommandEventID(stream, id, i), Type: "x", Data: []byte("{}"),
			Metadata: eventstore.Metadata{CommandID: id}}
	}
	return evs
}

// indexedCommands returns the command IDs that the command index holds, an
// entry per event.
func indexedCommands(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.readers.Query(`SELECT command_id FROM cairn_events INDEXED BY cairn_events_command
		WHERE command_id IS NOT NULL AND derived_id = 0 ORDER BY position`)
	require.NoError(t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// The command bus's appends cost the command index nothing: their first
// event's ID finds them, whichever way the store writes them (alone, in a
// group, in a caller's transaction). Commands named otherwise keep their
// entries.
func TestBusCommandsStayOutOfTheCommandIndex(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	alone, err := s.Append(ctx, "order-1", eventstore.NoStream, busNamed("order-1", "c1", 2)...)
	require.NoError(t, err)
	plain := busNamed("order-1", "c2", 1)
	plain[0].ID = eventstore.NewEventID()
	named, err := s.Append(ctx, "order-1", eventstore.Exact(1), plain...)
	require.NoError(t, err)
	var inTx eventstore.AppendResult
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		inTx, err = s.AppendTx(ctx, tx, "order-1", eventstore.Exact(2), busNamed("order-1", "c3", 3)...)
		return err
	}))
	grouped := make([]eventstore.AppendResult, 8)
	var wg sync.WaitGroup
	for i := range grouped {
		wg.Go(func() {
			stream := fmt.Sprint("group-", i)
			r, err := s.Append(ctx, stream, eventstore.NoStream, busNamed(stream, "g", 1)...)
			assert.NoError(t, err)
			grouped[i] = r
		})
	}
	wg.Wait()

	assert.Equal(t, []string{"c2"}, indexedCommands(t, s))
	for _, c := range []struct {
		stream, id string
		want       eventstore.AppendResult
	}{{"order-1", "c1", alone}, {"order-1", "c2", named}, {"order-1", "c3", inTx}} {
		got, found, err := s.CommandResult(ctx, c.stream, c.id)
		require.NoError(t, err)
		require.True(t, found, c.id)
		c.want.Duplicate = true
		assert.Equal(t, c.want, got, c.id)
	}
	for i, want := range grouped {
		got, found, err := s.CommandResult(ctx, fmt.Sprint("group-", i), "g")
		require.NoError(t, err)
		require.True(t, found)
		want.Duplicate = true
		assert.Equal(t, want, got)
	}
}

// A command appended by the bus and again apart, with IDs of its own (which
// the bus never does): its events are all of them, as before the bus's
// appends left the index.
func TestCommandAppendedByTheBusAndApart(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, ev("x"))
	require.NoError(t, err)
	bus, err := s.Append(ctx, "order-1", eventstore.Exact(0), busNamed("order-1", "c1", 2)...)
	require.NoError(t, err)
	_, err = s.Append(ctx, "order-1", eventstore.Exact(2), busNamed("order-1", "c2", 1)...)
	require.NoError(t, err)
	again := busNamed("order-1", "c1", 1)
	again[0].ID = eventstore.NewEventID()
	apart, err := s.Append(ctx, "order-1", eventstore.Exact(3), again...)
	require.NoError(t, err)

	got, found, err := s.CommandResult(ctx, "order-1", "c1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, eventstore.AppendResult{FirstVersion: bus.FirstVersion, LastVersion: apart.LastVersion,
		Position: apart.Position, Duplicate: true}, got)
}

// A file of schema version 5 indexed every event that carries a command ID.
// Opening it keeps every command findable (the rebuilt index holds the
// events stored before), and the bus's appends from then on stay out of
// the index.
func TestOpenMigratesTheCommandIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	db := createAtVersion(t, path, 5)
	insertAsReleased(t, db, "order-1", 0, storekit.CommandEventID("order-1", "c1", 0), "c1")
	insertAsReleased(t, db, "order-1", 1, storekit.CommandEventID("order-1", "c2", 0), "c2")
	insertAsReleased(t, db, "order-1", 2, storekit.CommandEventID("order-1", "c2", 1), "c2")
	insertAsReleased(t, db, "order-1", 3, eventstore.NewEventID(), "")
	insertAsReleased(t, db, "order-2", 0, eventstore.NewEventID(), "c9")
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []string{"c1", "c2", "c2", "c9"}, indexedCommands(t, s), "the old index's entries")
	for _, c := range []struct {
		stream, id  string
		first, last uint64
		position    uint64
	}{{"order-1", "c1", 0, 0, 1}, {"order-1", "c2", 1, 2, 3}, {"order-2", "c9", 0, 0, 5}} {
		got, found, err := s.CommandResult(ctx, c.stream, c.id)
		require.NoError(t, err)
		require.True(t, found, c.id)
		assert.Equal(t, eventstore.AppendResult{FirstVersion: c.first, LastVersion: c.last,
			Position: eventstore.Position{Major: c.position}, Duplicate: true}, got, c.id)
	}

	// A redelivered command of before is absorbed by its IDs, and a new
	// one stays out of the index.
	again, err := s.Append(ctx, "order-1", eventstore.Exact(0), busNamed("order-1", "c2", 2)...)
	require.NoError(t, err)
	assert.Equal(t, eventstore.AppendResult{FirstVersion: 1, LastVersion: 2, Position: eventstore.Position{Major: 3},
		Duplicate: true}, again)
	added, err := s.Append(ctx, "order-1", eventstore.Exact(3), busNamed("order-1", "c3", 1)...)
	require.NoError(t, err)
	assert.Equal(t, []string{"c1", "c2", "c2", "c9"}, indexedCommands(t, s))
	got, found, err := s.CommandResult(ctx, "order-1", "c3")
	require.NoError(t, err)
	require.True(t, found)
	added.Duplicate = true
	assert.Equal(t, added, got)
}
