package sqlite

import (
	"context"
	"database/sql"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// sqlCommandResult names its index: for min(version) SQLite would rather
// scan the whole stream on the stream index.
const sqlCommandResult = `SELECT min(version), max(version), max(position)
	FROM cairn_events INDEXED BY cairn_events_command WHERE stream = ? AND command_id = ?`

// CommandResult reports what command commandID appended to stream (events
// record their command in [eventstore.Metadata.CommandID]): the versions and
// position of its events, with Duplicate set, and found true; or found false
// when the stream holds no event of that command, or commandID is empty (as
// in every store: storetest.Run checks it). An index answers it, so a
// command bus can absorb a redelivered command without reading the stream.
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
	var first, last, pos sql.NullInt64
	err = s.readers.QueryRowContext(noInterrupt, sqlCommandResult, stream, commandID).Scan(&first, &last, &pos)
	if err != nil {
		return r, false, s.readErr(ctx, err, "look up command "+quote(commandID)+" in stream "+quote(stream))
	}
	if !first.Valid {
		return r, false, nil
	}
	return eventstore.AppendResult{
		FirstVersion: uint64(first.Int64),
		LastVersion:  uint64(last.Int64),
		Position:     eventstore.Position{Major: uint64(pos.Int64)},
		Duplicate:    true,
	}, true, nil
}
