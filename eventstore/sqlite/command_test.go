package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// The reads that matter are index lookups or ordered index scans, never a
// scan of the whole log or of a whole stream.
func TestQueryPlansUseIndexes(t *testing.T) {
	s := openTest(t)
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
	typeQ, typeArgs := pageQuery(eventstore.Start, eventstore.Filter{Types: []string{"a"}}, 10)
	typesQ, typesArgs := pageQuery(eventstore.Start, eventstore.Filter{Types: []string{"a", "b"}}, 10)
	prefixQ, prefixArgs := pageQuery(eventstore.Start, eventstore.Filter{StreamPrefixes: []string{"order-"}}, 10)
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"command", sqlCommandResult, []any{"s", "c"}, "USING INDEX cairn_events_command (stream=? AND command_id=?)"},
		{"append state", stateQ, stateArgs, "USING INDEX cairn_events_id (id=?)"},
		{"stream forward", streamQuery(false, 10), []any{"s", 0}, "USING INDEX cairn_events_stream_version (stream=? AND version>?)"},
		{"one type", typeQ, typeArgs, "USING INDEX cairn_events_type (type=? AND rowid>?)"},
		{"two types", typesQ, typesArgs, "USING INDEX cairn_events_type (type=? AND rowid>?)"},
		{"prefix", prefixQ, prefixArgs, "USING INTEGER PRIMARY KEY (rowid>?)"},
	} {
		got := plan(c.query, c.args...)
		assert.Contains(t, got, c.want, c.name)
		if c.name == "one type" || c.name == "prefix" {
			assert.NotContains(t, got, "TEMP B-TREE", "%s: pages must not sort the whole match", c.name)
		}
	}
}
