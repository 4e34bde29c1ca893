package sqlite

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// stmtStatus reads one of SQLite's counters of a prepared statement
// (sqlite3_stmt_status), which zombiezen.com/go/sqlite does not expose: the
// statement's handle is read by reflection, and the test fails, rather than
// misreads, if the package stops holding it where this looks.
func stmtStatus(t *testing.T, stmt *zs.Stmt, op int32) int32 {
	t.Helper()
	handle := reflect.ValueOf(stmt).Elem().FieldByName("stmt")
	require.True(t, handle.IsValid() && handle.Kind() == reflect.Uintptr, "zombiezen Stmt no longer holds its handle in field stmt")
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlite3.Xsqlite3_stmt_status(tls, uintptr(handle.Uint()), op, 0)
}

// The page reads bind only values the planner does not look at, so each
// stays one prepared statement: SQLite with STAT4 prepares a statement again
// every time a bound LIMIT changes, which cost a sixth of a stream read.
func TestPageReadsAreNotPreparedAgain(t *testing.T) {
	for _, typeIndex := range []bool{false, true} {
		t.Run(fmt.Sprintf("type index %v", typeIndex), func(t *testing.T) { checkPageReadsNotPreparedAgain(t, typeIndex) })
	}
}

func checkPageReadsNotPreparedAgain(t *testing.T, typeIndex bool) {
	ctx := context.Background()
	// One reader connection, so that every read below runs on the
	// connection the counters are read from.
	s, err := Open(ctx, filepath.Join(t.TempDir(), "events.db"), Options{MaxReaders: 1, TypeIndex: typeIndex})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	for i := range 3 {
		var events []eventstore.EventData
		for j := range 20 {
			events = append(events, eventstore.EventData{Type: []string{"a", "b", "c"}[j%3], Data: []byte("{}")})
		}
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i), eventstore.Any, events...)
		require.NoError(t, err)
	}

	drain := func(seq func(func(eventstore.Event, error) bool)) int {
		n := 0
		for _, err := range seq {
			require.NoError(t, err)
			n++
		}
		return n
	}
	filters := []eventstore.Filter{{}, {Types: []string{"a"}}, {Types: []string{"a", "b"}}, {StreamPrefixes: []string{"order-1"}}}
	for round := range 4 {
		for _, backward := range []bool{false, true} {
			opts := eventstore.ReadOptions{From: uint64(round), Limit: round + 1, Backward: backward}
			require.Equal(t, round+1, drain(s.ReadStream(ctx, "order-1", opts)))
			opts.Limit = 0
			require.NotZero(t, drain(s.ReadStream(ctx, "order-1", opts)))
		}
		for _, f := range filters {
			require.NotZero(t, drain(s.ReadAll(ctx, eventstore.Position{Major: uint64(round)}, f)))
			page, err := s.readPage(ctx, eventstore.Position{Major: uint64(round)}, f, round+1)
			require.NoError(t, err)
			require.Len(t, page.Events, round+1)
		}
	}

	queries := map[string]string{
		"stream forward":  streamQuery(false, 1),
		"stream backward": streamQuery(true, 1),
	}
	for i, f := range filters {
		q, _ := pageQuery(eventstore.Start, f, storekit.DefaultPageSize, typeIndex)
		queries[fmt.Sprintf("page, filter %d", i)] = q
		small, _ := pageQuery(eventstore.Start, f, 1, typeIndex)
		require.Equal(t, q, small, "a smaller page must use the same statement")
	}
	require.NoError(t, s.events.with(ctx, func(conn *zs.Conn) error {
		for name, q := range queries {
			stmt, err := conn.Prepare(q) // the connection's cached statement
			require.NoError(t, err)
			require.Greater(t, stmtStatus(t, stmt, sqlite3.SQLITE_STMTSTATUS_RUN), int32(3), "%s: the reads above did not run it", name)
			require.Zero(t, stmtStatus(t, stmt, sqlite3.SQLITE_STMTSTATUS_REPREPARE), "%s was prepared again", name)
		}

		// The probe sees what it looks for: a bound LIMIT is prepared again.
		stmt, err := conn.Prepare(`SELECT position FROM cairn_events WHERE stream = ? ORDER BY version LIMIT ?`)
		require.NoError(t, err)
		for limit := range 3 {
			stmt.BindText(1, "order-1")
			stmt.BindInt64(2, int64(limit+1))
			_, err := stmt.Step()
			require.NoError(t, err)
			require.NoError(t, stmt.Reset())
		}
		require.NotZero(t, stmtStatus(t, stmt, sqlite3.SQLITE_STMTSTATUS_REPREPARE), "the probe cannot see a statement prepared again")
		return nil
	}))
}

func TestStatementLimit(t *testing.T) {
	for _, c := range []struct{ limit, want int64 }{
		{1, storekit.DefaultPageSize}, {storekit.DefaultPageSize, storekit.DefaultPageSize},
		{storekit.DefaultPageSize + 1, 2 * storekit.DefaultPageSize}, {1 << 40, 1 << 40}, {1<<62 + 1, 1<<62 + 1},
	} {
		if c.limit > math.MaxInt {
			continue // a 32-bit int cannot ask for it
		}
		require.Equal(t, c.want, statementLimit(int(c.limit)), "limit %d", c.limit)
	}
}
