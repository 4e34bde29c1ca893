package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.CommandIndex = (*Store)(nil)

const (
	// commandResultSQL finds a command's events through the partial index
	// events_stream_command: those that carry a command ID outside an
	// append of the command bus. It repeats the index's predicate so that
	// the planner can use the index with a generic plan too, where it
	// cannot see that the parameter is not empty.
	commandResultSQL = `SELECT min(version) OVER (), version, tx_id, seq FROM {{s}}.events
	WHERE stream = $1 AND command_id = $2 AND command_id <> '' AND NOT derived_id
	ORDER BY version DESC LIMIT 1`

	// commandDerivedSQL finds an append of the command bus: its first
	// event by its ID on events_stream_event_id ($3:
	// storekit.CommandEventID(stream, command, 0)), and its last as the
	// last of the events from there on that the store marked as the bus's
	// and that record the command. They are all that append's: a later
	// append marked for the same command would start with the same ID, and
	// a stream holds an event ID once (events_stream_event_id). The end is
	// found on events_stream_version, stepping the append's events and
	// stopping at the first that is not one (min with a filter is an
	// ordered index scan, LIMIT 1), so one round trip serves a command of
	// any size.
	commandDerivedSQL = `WITH first AS (
		SELECT version FROM {{s}}.events WHERE stream = $1 AND event_id = $3 AND command_id = $2 AND derived_id
	), after AS (
		SELECT min(version) AS version FROM {{s}}.events
		WHERE stream = $1 AND version > (SELECT version FROM first) AND NOT (derived_id AND command_id = $2)
	)
	SELECT first.version, last.version, last.tx_id, last.seq FROM first, LATERAL (
		SELECT version, tx_id, seq FROM {{s}}.events
		WHERE stream = $1 AND version >= first.version
			AND version < coalesce((SELECT version FROM after), 9223372036854775807)
		ORDER BY version DESC LIMIT 1
	) AS last`
)

// CommandResult implements [storekit.CommandIndex]: index lookups, however
// long the stream, in one round trip. The event-ID index finds the command
// bus's own appends by their first event's ID, and the command index the
// other events that carry a command ID.
func (s *Store) CommandResult(ctx context.Context, stream, commandID string) (eventstore.AppendResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	if ask, err := storekit.CheckCommandLookup(stream, commandID); !ask {
		return eventstore.AppendResult{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	var indexed, derived eventstore.AppendResult
	var inIndex, isDerived bool
	b := &pgx.Batch{}
	b.Queue(s.fill(commandResultSQL), stream, commandID).QueryRow(func(row pgx.Row) (err error) {
		indexed, inIndex, err = scanCommand(row, stream, commandID)
		return err
	})
	first := storekit.CommandEventID(stream, commandID, 0)
	b.Queue(s.fill(commandDerivedSQL), stream, commandID, pgUUID(first)).QueryRow(func(row pgx.Row) (err error) {
		derived, isDerived, err = scanCommand(row, stream, commandID)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, eventstore.ErrCorrupt) {
			return eventstore.AppendResult{}, false, err
		}
		return eventstore.AppendResult{}, false, s.closedOr(fmt.Errorf("postgres: finding command %q in stream %q: %w", commandID, stream, err))
	}
	r, found := storekit.CombineCommandResults(indexed, inIndex, derived, isDerived)
	return r, found, nil
}

// scanCommand reads a command's first version, last version and last
// position from row, which has none when the command is not there.
func scanCommand(row pgx.Row, stream, commandID string) (eventstore.AppendResult, bool, error) {
	var first, last, seq int64
	var txID uint64
	err := row.Scan(&first, &last, &txID, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.AppendResult{}, false, nil
	}
	if err != nil {
		return eventstore.AppendResult{}, false, err
	}
	if first < 0 || last < first || seq < 0 {
		return eventstore.AppendResult{}, false, fmt.Errorf("%w: stream %q: command %q has versions %d to %d at sequence %d",
			eventstore.ErrCorrupt, stream, commandID, first, last, seq)
	}
	return eventstore.AppendResult{FirstVersion: uint64(first), LastVersion: uint64(last),
		Position: eventstore.Position{Major: txID, Minor: uint64(seq)}, Duplicate: true}, true, nil
}
