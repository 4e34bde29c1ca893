package sqlite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

// appendConn is the writer's connection for groups made only of appends,
// the hot path of the store. It speaks SQLite's own API
// (zombiezen.com/go/sqlite, over the same modernc.org/sqlite library), not
// database/sql's: its statements are prepared once and kept, where the
// database/sql driver parses every statement on every call, which cost a
// fifth of an append's CPU. Everything else the writer does (consumer
// tables, InTx, the savepoint-per-append fallback) stays on the
// database/sql connection; the writer never has both in a transaction at
// once.
//
// Whichever goroutine commits (the writer's, or a caller's when the writer
// is idle) uses it, one group at a time.
type appendConn struct {
	conn *zs.Conn

	begin, commit, rollback *zs.Stmt
	lastVersion, insert     *zs.Stmt
}

const (
	sqlBeginImmediate = "BEGIN IMMEDIATE"
	// sqlFindIDs is completed with the placeholders of a chunk of IDs.
	sqlFindIDs = "SELECT stream, id, version, position FROM cairn_events WHERE id IN (?"
)

// openAppendConn opens the connection on the file that Open has already
// put in WAL mode and migrated, with the writer's settings.
func openAppendConn(abs string, opts Options) (*appendConn, error) {
	conn, err := zs.OpenConn(abs, zs.OpenReadWrite)
	if err != nil {
		return nil, err
	}
	c := &appendConn{conn: conn}
	conn.SetBusyTimeout(opts.BusyTimeout)
	for _, pragma := range []string{
		"PRAGMA synchronous = " + opts.Synchronous.pragma(),
		fmt.Sprintf("PRAGMA journal_size_limit = %d", journalSizeLimit),
		fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", backstopFrames), // see checkpointer
	} {
		if err := execute(conn, pragma); err != nil {
			conn.Close()
			return nil, err
		}
	}
	for _, s := range []struct {
		stmt  **zs.Stmt
		query string
	}{
		{&c.begin, sqlBeginImmediate},
		{&c.commit, "COMMIT"},
		{&c.rollback, "ROLLBACK"},
		{&c.lastVersion, "SELECT version FROM cairn_events WHERE stream = ? ORDER BY version DESC LIMIT 1"},
		{&c.insert, sqlInsert},
	} {
		if *s.stmt, err = conn.Prepare(s.query); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return c, nil
}

// step runs a statement that returns at most one row it does not need.
func step(stmt *zs.Stmt) error {
	_, err := stmt.Step()
	if rerr := stmt.Reset(); err == nil {
		err = rerr
	}
	return err
}

// streamState reads the last version of a stream.
func (c *appendConn) streamState(stream string) (last uint64, exists bool, err error) {
	stmt := c.lastVersion
	defer stmt.Reset()
	stmt.BindText(1, stream)
	row, err := stmt.Step()
	if err != nil || !row {
		return 0, false, err
	}
	v := stmt.ColumnInt64(0)
	if v < 0 {
		return 0, false, &CorruptError{Stream: stream, Version: uint64(v), Field: "version", Reason: "is negative"}
	}
	return uint64(v), true, nil
}

// findIDs looks the event IDs up in every stream, idChunk at a time, and
// calls found for each stored event that holds one.
func (c *appendConn) findIDs(ids []uuid.UUID, found func(stream string, id uuid.UUID, version, position int64)) error {
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		stmt, err := c.conn.Prepare(idQueries[len(chunk)])
		if err != nil {
			return err
		}
		for i := range chunk {
			stmt.BindBytes(i+1, chunk[i][:])
		}
		for {
			row, err := stmt.Step()
			if err != nil {
				return err
			}
			if !row {
				break
			}
			var id uuid.UUID
			if stmt.ColumnLen(1) != len(id) {
				continue // not an ID this store wrote: it cannot match
			}
			stmt.ColumnBytes(1, id[:])
			found(stmt.ColumnText(0), id, stmt.ColumnInt64(2), stmt.ColumnInt64(3))
		}
		if err := stmt.Reset(); err != nil {
			return err
		}
	}
	return nil
}

// idQueries[n] looks up n event IDs.
var idQueries = func() []string {
	q := make([]string, idChunk+1)
	for n := 1; n <= idChunk; n++ {
		q[n] = sqlFindIDs + strings.Repeat(", ?", n-1) + ")"
	}
	return q
}()

// insertEvent writes one event and returns its position.
func (c *appendConn) insertEvent(stream string, version uint64, e *eventstore.EventData, extra any, recordedAt int64, derivedID bool) (int64, error) {
	stmt := c.insert
	stmt.BindText(1, stream)
	stmt.BindInt64(2, int64(version))
	stmt.BindBytes(3, e.ID[:])
	stmt.BindText(4, e.Type)
	stmt.BindInt64(5, int64(e.SchemaVersion))
	stmt.BindBytes(6, e.Data)
	bindNullable(stmt, 7, e.Metadata.CorrelationID)
	bindNullable(stmt, 8, e.Metadata.CausationID)
	bindNullable(stmt, 9, e.Metadata.CommandID)
	if extra, ok := extra.(string); ok {
		stmt.BindText(10, extra)
	} else {
		stmt.BindNull(10)
	}
	stmt.BindInt64(11, recordedAt)
	stmt.BindBool(12, derivedID)
	err := step(stmt)
	// Bound values stay in C memory until cleared: up to a whole event.
	if cerr := stmt.ClearBindings(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: append to stream %q: write version %s: %w", stream, strconv.FormatUint(version, 10), err)
	}
	return c.conn.LastInsertRowID(), nil
}

// bindNullable binds an empty string as NULL, as [nullable] does.
func bindNullable(stmt *zs.Stmt, param int, s string) {
	if s == "" {
		stmt.BindNull(param)
	} else {
		stmt.BindText(param, s)
	}
}

// close finalizes the statements and closes the connection.
func (c *appendConn) close() error { return c.conn.Close() }
