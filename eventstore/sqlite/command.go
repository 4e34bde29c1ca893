package sqlite

import (
	"context"
	"database/sql"

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

	// sqlCommandDerived reads an append of the command bus, from its first
	// event, which its ID finds (?3: storekit.CommandEventID(stream,
	// command, 0)), then on through the stream for as long as the events
	// are that append's. Only one append of a stream can start with that
	// ID, since a stream holds an event ID once.
	sqlCommandDerived = `SELECT version, position, id, command_id, derived_id FROM cairn_events
	WHERE stream = ?1 AND version >= (SELECT version FROM cairn_events
		WHERE id = ?3 AND stream = ?1 AND command_id = ?2 AND derived_id = 1)
	ORDER BY version`
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
	var first, last, pos sql.NullInt64
	err = s.readers.QueryRowContext(noInterrupt, sqlCommandIndexed, stream, commandID).Scan(&first, &last, &pos)
	if err != nil {
		return r, false, s.readErr(ctx, err, what)
	}
	if first.Valid {
		r = eventstore.AppendResult{FirstVersion: uint64(first.Int64), LastVersion: uint64(last.Int64),
			Position: eventstore.Position{Major: uint64(pos.Int64)}, Duplicate: true}
		found = true
	}
	d, derived, err := s.derivedCommand(stream, commandID)
	if err != nil {
		return eventstore.AppendResult{}, false, s.readErr(ctx, err, what)
	}
	if !derived {
		return r, found, nil
	}
	if !found {
		return d, true, nil
	}
	// Both: a command whose events were appended apart, which the bus
	// never does. Answer as for any command: all of its events.
	r.FirstVersion, r.LastVersion = min(r.FirstVersion, d.FirstVersion), max(r.LastVersion, d.LastVersion)
	r.Position.Major = max(r.Position.Major, d.Position.Major)
	return r, true, nil
}

// derivedCommand reports the append of the command bus that stored command
// commandID in stream, if there is one: the events from its first, whose
// ID is storekit.CommandEventID(stream, commandID, 0), for as long as the
// i-th carries the i-th such ID.
func (s *Store) derivedCommand(stream, commandID string) (r eventstore.AppendResult, found bool, err error) {
	firstID := storekit.CommandEventID(stream, commandID, 0)
	rows, err := s.readers.QueryContext(noInterrupt, sqlCommandDerived, stream, commandID, firstID[:])
	if err != nil {
		return r, false, err
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var version, position, derived int64
		var id []byte
		var command sql.NullString
		if err := rows.Scan(&version, &position, &id, &command, &derived); err != nil {
			return r, false, err
		}
		want := storekit.CommandEventID(stream, commandID, i)
		if derived != 1 || command.String != commandID || string(id) != string(want[:]) {
			break // the next append's
		}
		if i == 0 {
			r.FirstVersion = uint64(version)
		}
		r.LastVersion, r.Position.Major, found = uint64(version), uint64(position), true
	}
	if err := rows.Err(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	r.Duplicate = found
	return r, found, nil
}
