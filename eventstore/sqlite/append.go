package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Append implements [eventstore.Store.Append]. The append joins the writer's
// next transaction. If ctx ends while it waits to be taken, nothing is
// written and Append returns ctx.Err(); once taken, it completes and reports
// the outcome.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := s.notInTx(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	j, err := newAppendJob(ctx, stream, expected, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := s.w.submit(j, true); err != nil {
		return eventstore.AppendResult{}, err
	}
	if _, err := await(ctx, s.w, &j.handoff, j.done); err != nil {
		return eventstore.AppendResult{}, err
	}
	if j.err != nil {
		return j.result, s.fileFailure("append to stream "+quote(stream), j.err)
	}
	return j.result, nil
}

// newAppendJob checks and encodes an append for the writer.
func newAppendJob(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (*appendJob, error) {
	// Only IDs the caller chose can repeat stored ones: the store's own are
	// new UUIDv7s. Knowing this spares a lookup per event.
	callerIDs := false
	for i := range events {
		if events[i].ID != (uuid.UUID{}) {
			callerIDs = true
			break
		}
	}
	prepared, err := storekit.PrepareAppend(ctx, stream, events)
	if err != nil {
		return nil, err
	}
	// Encoding here, not in the writer, keeps the single writer busy only
	// with SQLite.
	var extras []any // nil when no event has any
	for i := range prepared {
		if len(prepared[i].Metadata.Extra) == 0 {
			continue
		}
		if extras == nil {
			extras = make([]any, len(prepared))
		}
		if extras[i], err = encodeExtra(prepared[i].Metadata.Extra); err != nil {
			return nil, &eventstore.InvalidArgumentError{
				Stream: stream, Index: i, Field: "metadata", Reason: err.Error()}
		}
	}
	return &appendJob{
		stream:     stream,
		expected:   expected,
		events:     prepared,
		extras:     extras,
		callerIDs:  callerIDs,
		derivedIDs: callerIDs && storekit.CommandIDsDerived(stream, prepared),
		done:       make(chan struct{}),
	}, nil
}

// appendJob is one Append waiting for, or running in, the writer.
type appendJob struct {
	stream    string
	expected  eventstore.ExpectedVersion
	events    []eventstore.EventData
	extras    []any // Metadata.Extra of each event, encoded; nil when all are empty
	callerIDs bool
	// derivedIDs marks an append of the command bus, whose events the
	// command index leaves out (see the migration that added derived_id).
	derivedIDs bool

	handoff

	result eventstore.AppendResult
	err    error
	done   chan struct{}
}

// extra is the encoded Metadata.Extra of event i, nil for none.
func (j *appendJob) extra(i int) any {
	if j.extras == nil {
		return nil
	}
	return j.extras[i]
}

func (j *appendJob) finish(err error) {
	if err != nil {
		j.result = eventstore.AppendResult{}
	}
	j.err = err
	close(j.done)
}

// run checks the stream's state and writes the events. Earlier jobs of the
// same transaction are visible to it, so two appends to one stream in one
// group are checked one after the other, as if committed apart. It writes
// nothing unless the checks pass.
func (j *appendJob) run(tx *writeTx) error {
	last, exists, repeat, err := j.state(tx)
	if err != nil {
		return err
	}
	next := uint64(0)
	if exists {
		next = last + 1
	}
	repeat.Current = storekit.StreamState(last, exists)
	if len(repeat.Stored) > 0 {
		first, found, err := storekit.CheckRepeat(j.stream, j.expected, j.events, repeat)
		if err != nil {
			return err
		}
		if found {
			return j.duplicate(tx, first)
		}
	}
	if !j.expected.Matches(last, exists) {
		return &eventstore.WrongVersionError{Stream: j.stream, Expected: j.expected, Actual: repeat.Current}
	}
	pos, err := j.insert(tx, next)
	if err != nil {
		return err
	}
	j.result = eventstore.AppendResult{
		FirstVersion: next,
		LastVersion:  next + uint64(len(j.events)) - 1,
		Position:     eventstore.Position{Major: uint64(pos)},
	}
	return nil
}

// state reads, in one statement, the stream's last version and the
// versions at which it holds the append's caller-chosen event IDs.
func (j *appendJob) state(tx *writeTx) (last uint64, exists bool, repeat storekit.Repeat, err error) {
	fail := func(err error) (uint64, bool, storekit.Repeat, error) {
		return 0, false, repeat, fmt.Errorf("sqlite: append to stream %q: read its state: %w", j.stream, err)
	}
	query, args := sqlLastVersion, []any{j.stream}
	if j.callerIDs {
		query, args = stateQuery(j.stream, j.events)
	}
	rows, err := tx.conn.QueryContext(context.Background(), query, args...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id []byte
		var version sql.NullInt64
		if err := rows.Scan(&id, &version); err != nil {
			return fail(err)
		}
		if version.Valid && version.Int64 < 0 {
			return 0, false, repeat, &CorruptError{Stream: j.stream, Version: uint64(version.Int64), Field: "version", Reason: "is negative"}
		}
		switch {
		case id == nil: // the row of the last version
			last, exists = uint64(version.Int64), version.Valid
		case len(id) == len(uuid.UUID{}):
			if repeat.Stored == nil {
				repeat.Stored = make(map[uuid.UUID]uint64)
			}
			repeat.Stored[uuid.UUID(id)] = uint64(version.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return last, exists, repeat, nil
}

// stateQuery looks up the last version and the given event IDs. The unary
// plus keeps SQLite on the ID index: the stream index would scan the whole
// stream.
func stateQuery(stream string, events []eventstore.EventData) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT NULL, (SELECT version FROM cairn_events WHERE stream = ?1 ORDER BY version DESC LIMIT 1)
		UNION ALL SELECT id, version FROM cairn_events WHERE +stream = ?1 AND id IN (`)
	args := make([]any, 0, len(events)+1)
	args = append(args, stream)
	for i := range events {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		args = append(args, events[i].ID[:])
	}
	b.WriteString(")")
	return b.String(), args
}

// duplicate reports an exact repeat of an earlier append.
func (j *appendJob) duplicate(tx *writeTx, first uint64) error {
	last := first + uint64(len(j.events)) - 1
	var pos int64
	if err := tx.conn.QueryRowContext(context.Background(), sqlPositionAt, j.stream, int64(last)).Scan(&pos); err != nil {
		return fmt.Errorf("sqlite: append to stream %q: read the position of version %d: %w", j.stream, last, err)
	}
	j.result = eventstore.AppendResult{FirstVersion: first, LastVersion: last, Position: eventstore.Position{Major: uint64(pos)}, Duplicate: true}
	return nil
}

// insertChunk bounds the rows of one INSERT. Fewer statements save parsing
// (the driver prepares each statement anew), but the driver matches bound
// parameters in quadratic time, so chunks stay small.
const insertChunk = 16

// insert writes the events from version next on, a chunk of rows per
// statement, and returns the position of the last.
func (j *appendJob) insert(tx *writeTx, next uint64) (int64, error) {
	recordedAt := tx.now.UnixNano()
	var pos int64
	for start := 0; start < len(j.events); start += insertChunk {
		chunk := j.events[start:min(start+insertChunk, len(j.events))]
		args := tx.args[:0]
		for i := range chunk {
			e := &chunk[i]
			args = append(args, j.stream, int64(next)+int64(start+i), e.ID[:], e.Type, int64(e.SchemaVersion), e.Data,
				nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID),
				j.extra(start+i), recordedAt, j.derivedIDs)
		}
		res, err := tx.conn.ExecContext(context.Background(), insertQuery(len(chunk)), args...)
		clear(args)
		tx.args = args[:0]
		if err != nil {
			return 0, fmt.Errorf("sqlite: append to stream %q: write events %d to %d (from version %d): %w",
				j.stream, start, start+len(chunk)-1, next+uint64(start), err)
		}
		if pos, err = res.LastInsertId(); err != nil {
			return 0, fmt.Errorf("sqlite: append to stream %q: read the position: %w", j.stream, err)
		}
	}
	return pos, nil
}

const insertRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// insertQueries[n] is the INSERT of n rows, built once.
var insertQueries = func() []string {
	q := make([]string, insertChunk+1)
	for n := 1; n <= insertChunk; n++ {
		q[n] = sqlInsert + strings.Repeat(", "+insertRow, n-1)
	}
	return q
}()

func insertQuery(rows int) string { return insertQueries[rows] }

// nullable stores an empty string as NULL, which keeps the command ID index
// to the events that have one.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func encodeExtra(extra map[string]string) (any, error) {
	if len(extra) == 0 {
		return nil, nil
	}
	// JSON would silently replace invalid UTF-8, and the event would not
	// read back as it was written.
	for k, v := range extra {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("entry %q is not valid UTF-8", k)
		}
	}
	return string(storekit.ExtraJSON(extra)), nil
}
