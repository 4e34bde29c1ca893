package sqlite

import (
	"context"
	"database/sql"
	"fmt"
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

// storedEvent is where an event ID sits.
type storedEvent struct{ version, position uint64 }

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
	streams, tip, err := w.groupState(ctx, jobs)
	if err != nil {
		return err
	}
	args := tx.args[:0]
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		_, err := w.conn.ExecContext(ctx, insertAtQueries[rows], args...)
		clear(args)
		args, rows = args[:0], 0
		return err
	}
	recordedAt := tx.now.UnixNano()
	next := tip + 1
	for _, j := range jobs {
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
				last := j.events[len(j.events)-1].ID
				j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: st.ids[last].version,
					Position: eventstore.Position{Major: st.ids[last].position}, Duplicate: true}
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
			args = append(args, int64(next), j.stream, int64(version), e.ID[:], e.Type, int64(e.SchemaVersion), e.Data,
				nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID),
				j.extras[i], recordedAt)
			if st.ids == nil {
				st.ids = make(map[uuid.UUID]storedEvent)
			}
			st.ids[e.ID] = storedEvent{version, next}
			next++
			if rows++; rows == insertChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		st.last, st.exists = first+uint64(len(j.events))-1, true
		j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: st.last,
			Position: eventstore.Position{Major: next - 1}}
	}
	err = flush()
	tx.args = args[:0]
	return err
}

// groupState reads the end of the log, the last version of every stream of
// the group, and where those streams hold the caller-chosen event IDs.
func (w *writer) groupState(ctx context.Context, jobs []*appendJob) (map[string]*groupStream, uint64, error) {
	streams := make(map[string]*groupStream, len(jobs))
	var names []any
	var ids []any
	for _, j := range jobs {
		if streams[j.stream] == nil {
			streams[j.stream] = &groupStream{}
			names = append(names, j.stream)
		}
		if j.callerIDs {
			for i := range j.events {
				ids = append(ids, j.events[i].ID[:])
			}
		}
	}
	first := ids[:min(len(ids), idChunk)]
	var b strings.Builder
	b.WriteString(`SELECT NULL, NULL, (SELECT coalesce(max(position), 0) FROM cairn_events), NULL
		UNION ALL SELECT s.column1, NULL, (SELECT version FROM cairn_events WHERE stream = s.column1
			ORDER BY version DESC LIMIT 1), NULL FROM (VALUES (?)`)
	b.WriteString(strings.Repeat(", (?)", len(names)-1))
	b.WriteString(") AS s")
	if len(first) > 0 {
		b.WriteString(" UNION ALL " + idLookup(len(first)))
	}
	var tip int64 = -1
	scan := func(query string, args []any) error {
		rows, err := w.conn.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var stream sql.NullString
			var id []byte
			var version, position sql.NullInt64
			if err := rows.Scan(&stream, &id, &version, &position); err != nil {
				return err
			}
			switch {
			case !stream.Valid: // the end of the log
				tip = version.Int64
			case id == nil: // a stream's last version
				st := streams[stream.String]
				st.last, st.exists = uint64(version.Int64), version.Valid
				if version.Int64 < 0 {
					st.corrupt = &CorruptError{Stream: stream.String, Version: uint64(version.Int64), Field: "version", Reason: "is negative"}
				}
			default: // a stored event ID
				st := streams[stream.String]
				if st == nil || len(id) != len(uuid.UUID{}) || version.Int64 < 0 || position.Int64 <= 0 {
					continue // another stream's, or not an ID this store wrote
				}
				if st.ids == nil {
					st.ids = make(map[uuid.UUID]storedEvent)
				}
				st.ids[uuid.UUID(id)] = storedEvent{uint64(version.Int64), uint64(position.Int64)}
			}
		}
		return rows.Err()
	}
	if err := scan(b.String(), append(names, first...)); err != nil {
		return nil, 0, err
	}
	for start := len(first); start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		if err := scan(idLookup(len(chunk)), chunk); err != nil {
			return nil, 0, err
		}
	}
	if tip < 0 {
		return nil, 0, fmt.Errorf("sqlite: the end of the log reads as %d", tip)
	}
	return streams, uint64(tip), nil
}

// idLookup finds n event IDs in any stream.
func idLookup(n int) string {
	return "SELECT stream, id, version, position FROM cairn_events WHERE id IN (?" + strings.Repeat(", ?", n-1) + ")"
}

const insertAtRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// insertAtQueries[n] inserts n rows at positions the writer chose: it holds
// the write lock, so the next position is the end of the log plus one.
var insertAtQueries = func() []string {
	q := make([]string, insertChunk+1)
	for n := 1; n <= insertChunk; n++ {
		q[n] = `INSERT INTO cairn_events (position, stream, version, id, type, schema_version, data,
		correlation_id, causation_id, command_id, extra, recorded_at) VALUES ` + insertAtRow + strings.Repeat(", "+insertAtRow, n-1)
	}
	return q
}()
