package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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

	// commandDerivedSQL reads an append of the command bus from its first
	// event, which its ID finds on events_stream_event_id ($3:
	// storekit.CommandEventID(stream, command, 0)), then on through the
	// stream, a page of $4 events: only one append of a stream can start
	// with that ID, since a stream holds an event ID once.
	commandDerivedSQL = `SELECT version, tx_id, seq, event_id, command_id, derived_id FROM {{s}}.events
	WHERE stream = $1 AND version >= (SELECT version FROM {{s}}.events
		WHERE stream = $1 AND event_id = $3 AND command_id = $2 AND derived_id)
	ORDER BY version LIMIT $4`

	// commandPageSQL reads on when the first page was the command's: from
	// version $2.
	commandPageSQL = `SELECT version, tx_id, seq, event_id, command_id, derived_id FROM {{s}}.events
	WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`

	// commandPage is how many events a page of a command's events reads: a
	// command appends a few, and one more tells where they end.
	commandPage = 17
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
	var indexed eventstore.AppendResult
	var inIndex bool
	run := derivedRun{stream: stream, commandID: commandID}
	b := &pgx.Batch{}
	b.Queue(s.fill(commandResultSQL), stream, commandID).QueryRow(func(row pgx.Row) error {
		var first, last, seq int64
		var txID uint64
		err := row.Scan(&first, &last, &txID, &seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if first < 0 || last < first || seq < 0 {
			return fmt.Errorf("%w: stream %q: command %q has versions %d to %d at sequence %d",
				eventstore.ErrCorrupt, stream, commandID, first, last, seq)
		}
		indexed, inIndex = eventstore.AppendResult{FirstVersion: uint64(first), LastVersion: uint64(last),
			Position: eventstore.Position{Major: txID, Minor: uint64(seq)}, Duplicate: true}, true
		return nil
	})
	first := storekit.CommandEventID(stream, commandID, 0)
	b.Queue(s.fill(commandDerivedSQL), stream, commandID, pgUUID(first), commandPage).Query(run.read)
	err := s.pool.SendBatch(ctx, b).Close()
	for err == nil && run.more {
		var rows pgx.Rows
		rows, err = s.pool.Query(ctx, s.fill(commandPageSQL), stream, int64(run.r.LastVersion+1), commandPage)
		if err == nil {
			err = run.read(rows)
		}
	}
	if err != nil {
		if errors.Is(err, eventstore.ErrCorrupt) {
			return eventstore.AppendResult{}, false, err
		}
		return eventstore.AppendResult{}, false, s.closedOr(fmt.Errorf("postgres: finding command %q in stream %q: %w", commandID, stream, err))
	}
	derived := run.r
	switch {
	case !run.found:
		return indexed, inIndex, nil
	case !inIndex:
		return derived, true, nil
	}
	// Both: a command whose events were appended apart, which the bus
	// never does. Answer as for any command: all of its events.
	r := indexed
	r.FirstVersion, r.LastVersion = min(r.FirstVersion, derived.FirstVersion), max(r.LastVersion, derived.LastVersion)
	if r.Position.Before(derived.Position) {
		r.Position = derived.Position
	}
	return r, true, nil
}

// derivedRun collects an append of the command bus, page by page: the
// events from its first for as long as the i-th carries the i-th ID that
// storekit.CommandEventID gives the command.
type derivedRun struct {
	stream, commandID string
	r                 eventstore.AppendResult
	found             bool
	n                 int  // events of the append read so far
	more              bool // the last page was the append's to its end: read on
}

func (d *derivedRun) read(rows pgx.Rows) error {
	defer rows.Close()
	d.more = false
	read, ended := 0, false
	for rows.Next() {
		read++
		if ended {
			continue
		}
		var version, seq int64
		var txID uint64
		var id pgtype.UUID
		var command string
		var derived bool
		if err := rows.Scan(&version, &txID, &seq, &id, &command, &derived); err != nil {
			return err
		}
		if !derived || command != d.commandID || id.Bytes != storekit.CommandEventID(d.stream, d.commandID, d.n) {
			ended = true // the next append's
			continue
		}
		if version < 0 || seq < 0 {
			return fmt.Errorf("%w: stream %q: command %q has version %d at sequence %d",
				eventstore.ErrCorrupt, d.stream, d.commandID, version, seq)
		}
		if d.n == 0 {
			d.r.FirstVersion = uint64(version)
		}
		d.r.LastVersion, d.r.Position = uint64(version), eventstore.Position{Major: txID, Minor: uint64(seq)}
		d.r.Duplicate, d.found = true, true
		d.n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	d.more = !ended && read == commandPage
	return nil
}
