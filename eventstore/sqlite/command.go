package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

const (
	// sqlCommandIndexed finds the events of a command that the command
	// index holds: those that carry a command ID outside an append of the
	// command bus. It names its index: for min(version) SQLite would
	// rather scan the whole stream on the stream index.
	sqlCommandIndexed = `SELECT min(version), max(version), max(position)
	FROM cairn_events INDEXED BY cairn_events_command WHERE stream = ? AND command_id = ? AND derived_id = 0`

	// sqlCommandDerived finds an append of the command bus: its first
	// event by its ID on cairn_events_id (?3: storekit.CommandEventID(stream,
	// command, 0)), and its last as the last of the events from there on
	// that the store marked as the bus's and that record the command. They
	// are all that append's: a later append marked for the same command
	// would start with the same ID, and a stream holds an event ID once (the
	// append path refuses a repeated one). The end is found on
	// cairn_events_stream_version, stepping the append's events up to the
	// first that is not one. PostgreSQL's CommandResult asks the same.
	sqlCommandDerived = `WITH first AS (
		SELECT version FROM cairn_events WHERE id = ?3 AND stream = ?1 AND command_id = ?2 AND derived_id = 1
	), after AS (
		SELECT version FROM cairn_events
		WHERE stream = ?1 AND version > (SELECT version FROM first) AND NOT (derived_id = 1 AND command_id IS ?2)
		ORDER BY version LIMIT 1
	)
	SELECT first.version, last.version, last.position FROM first, (
		SELECT version, position FROM cairn_events
		WHERE stream = ?1 AND version >= (SELECT version FROM first)
			AND version < coalesce((SELECT version FROM after), 9223372036854775807)
		ORDER BY version DESC LIMIT 1
	) AS last`
)

// CommandResult reports what command commandID appended to stream (events
// record their command in [eventstore.Metadata.CommandID]): the versions and
// position of its events, with Duplicate set, and found true; or found false
// when the stream holds no event of that command, or commandID is empty (as
// in every store: storetest.Run checks it). Indexes answer it, so a
// command bus can absorb a redelivered command without reading the stream:
// the event-ID index finds the command bus's own appends by their first
// event's ID, and the command index the other events that carry a command
// ID.
//
// It assumes, as the command bus guarantees, that one command's events are
// appended together.
func (s *Store) CommandResult(ctx context.Context, stream, commandID string) (r eventstore.AppendResult, found bool, err error) {
	if ask, err := storekit.CheckCommandLookup(stream, commandID); !ask {
		return r, false, err // no command: events without one are nobody's
	}
	if err := s.readable(ctx); err != nil {
		return r, false, err
	}
	what := "look up command " + quote(commandID) + " in stream " + quote(stream)
	indexed, inIndex, err := s.commandSpan(sqlCommandIndexed, stream, commandID)
	if err != nil {
		return r, false, s.readErr(ctx, err, what)
	}
	firstID := storekit.CommandEventID(stream, commandID, 0)
	derived, isDerived, err := s.commandSpan(sqlCommandDerived, stream, commandID, firstID[:])
	if err != nil {
		return r, false, s.readErr(ctx, err, what)
	}
	r, found = storekit.CombineCommandResults(indexed, inIndex, derived, isDerived)
	return r, found, nil
}

// commandSpan runs one of the command lookups, whose one row holds the
// first and last versions of the command's events it found and the
// position of the last, all NULL when it found none.
func (s *Store) commandSpan(query string, args ...any) (r eventstore.AppendResult, found bool, err error) {
	var first, last, pos sql.NullInt64
	err = s.readers.QueryRowContext(noInterrupt, query, args...).Scan(&first, &last, &pos)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !first.Valid {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	return eventstore.AppendResult{FirstVersion: uint64(first.Int64), LastVersion: uint64(last.Int64),
		Position: eventstore.Position{Major: uint64(pos.Int64)}, Duplicate: true}, true, nil
}
