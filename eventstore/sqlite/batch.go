package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// A group made only of appends takes a faster road than a savepoint per
// append: the writer reads the state of every stream in the group and every
// caller-chosen event ID in one query, checks each append in memory, in
// queue order, and writes the events of those that pass with a few
// multi-row INSERTs. An append that fails its checks writes nothing, so it
// needs no savepoint to undo; the others commit. The driver parses every
// statement anew, so statements, not rows, are what a group pays for: a
// group of 16 single-event appends costs 4 statements instead of 48.
//
// If SQLite fails any statement, the transaction is rolled back and the
// group is run again one savepoint per append (commitEach), so that an
// error that belongs to one append fails only that append.

// storedEvent is where an event ID sits: at a stored position, or in row
// row of this group's inserts (row >= 0), whose position SQLite assigns.
type storedEvent struct {
	version, position uint64
	row               int
}

// groupStream is what the group knows of one stream: its last version, and
// where it holds the event IDs that the group's appends name, including
// those that earlier appends of the group have just written.
type groupStream struct {
	last    uint64
	exists  bool
	corrupt error
	ids     map[uuid.UUID]storedEvent
}

// idChunk bounds the event IDs looked up per statement; the driver binds
// parameters in quadratic time.
const idChunk = 64

// commitAppends runs jobs in one transaction. It returns an error, with the
// transaction rolled back and no job finished, when SQLite failed; then the
// caller runs the group again one savepoint per job.
func (w *writer) commitAppends(jobs []*appendJob) error {
	ctx := context.Background()
	tx := &w.tx
	streams, err := w.groupState(ctx, jobs)
	if err != nil {
		return err
	}
	// Rows get the rowids SQLite gives them: one past the end of the log,
	// in order, as this writer holds the write lock and nothing is deleted.
	// rowPos[r] is the position of the group's row r, known once flushed.
	args := tx.args[:0]
	rowPos := w.rowPos[:0]
	pending := 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		res, err := w.conn.ExecContext(ctx, insertQueries[pending], args...)
		clear(args)
		args = args[:0]
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i := range pending {
			rowPos = append(rowPos, uint64(last-int64(pending)+1+int64(i)))
		}
		pending = 0
		return nil
	}
	defer func() {
		tx.args = args[:0]
		w.rowPos = rowPos[:0]
	}()
	recordedAt := tx.now.UnixNano()
	row := 0
	lastRows := make([]int, len(jobs)) // the row of each job's last event, or -1
	for k, j := range jobs {
		lastRows[k] = -1
		st := streams[j.stream]
		if st.corrupt != nil {
			j.err = st.corrupt
			continue
		}
		current := eventstore.StreamState(st.last, st.exists)
		if j.callerIDs && len(st.ids) > 0 {
			repeat := eventstore.Repeat{Current: current, Stored: make(map[uuid.UUID]uint64)}
			for _, e := range j.events {
				if se, ok := st.ids[e.ID]; ok {
					repeat.Stored[e.ID] = se.version
				}
			}
			first, found, err := eventstore.CheckRepeat(j.stream, j.expected, j.events, repeat)
			if err != nil {
				j.err = err
				continue
			}
			if found {
				last := st.ids[j.events[len(j.events)-1].ID]
				j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: last.version,
					Position: eventstore.Position{Major: last.position}, Duplicate: true}
				lastRows[k] = last.row
				continue
			}
		}
		if !j.expected.Matches(st.last, st.exists) {
			j.err = &eventstore.WrongVersionError{Stream: j.stream, Expected: j.expected, Actual: current}
			continue
		}
		first := uint64(0)
		if st.exists {
			first = st.last + 1
		}
		for i := range j.events {
			e := &j.events[i]
			version := first + uint64(i)
			args = append(args, j.stream, int64(version), e.ID[:], e.Type, int64(e.SchemaVersion), e.Data,
				nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID),
				j.extras[i], recordedAt)
			if st.ids == nil {
				st.ids = make(map[uuid.UUID]storedEvent)
			}
			st.ids[e.ID] = storedEvent{version: version, row: row}
			row++
			if pending++; pending == insertChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		st.last, st.exists = first+uint64(len(j.events))-1, true
		j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: st.last}
		lastRows[k] = row - 1
	}
	if err := flush(); err != nil {
		return err
	}
	for k, j := range jobs {
		if j.err == nil && lastRows[k] >= 0 {
			j.result.Position = eventstore.Position{Major: rowPos[lastRows[k]]}
		}
	}
	return nil
}

// groupState reads the last version of every stream of the group, and where
// those streams hold the caller-chosen event IDs, in one statement when the
// group names at most idChunk IDs. The statement is a UNION ALL of simple
// selects: a correlated subquery over a VALUES list reads the same but
// costs the parser three times as much.
func (w *writer) groupState(ctx context.Context, jobs []*appendJob) (map[string]*groupStream, error) {
	streams := make(map[string]*groupStream, len(jobs))
	var args []any
	var ids []any
	var b strings.Builder
	for _, j := range jobs {
		if streams[j.stream] == nil {
			streams[j.stream] = &groupStream{}
			if len(args) > 0 {
				b.WriteString(" UNION ALL ")
			}
			args = append(args, j.stream)
			n := strconv.Itoa(len(args))
			b.WriteString("SELECT ?" + n + ", NULL, (SELECT version FROM cairn_events WHERE stream = ?" + n +
				" ORDER BY version DESC LIMIT 1), NULL")
		}
		if j.callerIDs {
			for i := range j.events {
				ids = append(ids, j.events[i].ID[:])
			}
		}
	}
	first := ids[:min(len(ids), idChunk)]
	if len(first) > 0 {
		b.WriteString(" UNION ALL SELECT stream, id, version, position FROM cairn_events WHERE id IN (")
		for i := range first {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?" + strconv.Itoa(len(args)+i+1))
		}
		b.WriteString(")")
	}
	scan := func(query string, args []any) error {
		rows, err := w.conn.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var stream string
			var id []byte
			var version, position sql.NullInt64
			if err := rows.Scan(&stream, &id, &version, &position); err != nil {
				return err
			}
			st := streams[stream]
			switch {
			case st == nil:
				// An ID held by a stream outside the group.
			case id == nil: // the stream's last version
				st.last, st.exists = uint64(version.Int64), version.Valid
				if version.Int64 < 0 {
					st.corrupt = &CorruptError{Stream: stream, Version: uint64(version.Int64), Field: "version", Reason: "is negative"}
				}
			case len(id) == len(uuid.UUID{}) && version.Int64 >= 0 && position.Int64 > 0:
				if st.ids == nil {
					st.ids = make(map[uuid.UUID]storedEvent)
				}
				st.ids[uuid.UUID(id)] = storedEvent{uint64(version.Int64), uint64(position.Int64), -1}
			}
		}
		return rows.Err()
	}
	if err := scan(b.String(), append(args, first...)); err != nil {
		return nil, err
	}
	for start := len(first); start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		if err := scan(idLookup(len(chunk)), chunk); err != nil {
			return nil, err
		}
	}
	return streams, nil
}

// idLookup finds n event IDs in any stream.
func idLookup(n int) string {
	return "SELECT stream, id, version, position FROM cairn_events WHERE id IN (?" + strings.Repeat(", ?", n-1) + ")"
}
