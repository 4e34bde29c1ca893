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

// commandResultSQL finds a command's events through the partial index
// events_stream_command. Its "command_id <> ”" repeats the index's
// predicate so that the planner can use the index with a generic plan too,
// where it cannot see that the parameter is not empty.
const commandResultSQL = `SELECT min(version) OVER (), version, tx_id, seq FROM {{s}}.events
	WHERE stream = $1 AND command_id = $2 AND command_id <> ''
	ORDER BY version DESC LIMIT 1`

// CommandResult implements [storekit.CommandIndex]: one index lookup,
// however long the stream.
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
	var first, last, seq int64
	var txID uint64
	err := s.pool.QueryRow(ctx, s.fill(commandResultSQL), stream, commandID).Scan(&first, &last, &txID, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.AppendResult{}, false, nil
	}
	if err != nil {
		return eventstore.AppendResult{}, false, s.closedOr(fmt.Errorf("postgres: finding command %q in stream %q: %w", commandID, stream, err))
	}
	if first < 0 || last < first || seq < 0 {
		return eventstore.AppendResult{}, false, fmt.Errorf("%w: stream %q: command %q has versions %d to %d at sequence %d",
			eventstore.ErrCorrupt, stream, commandID, first, last, seq)
	}
	return eventstore.AppendResult{
		FirstVersion: uint64(first),
		LastVersion:  uint64(last),
		Position:     eventstore.Position{Major: txID, Minor: uint64(seq)},
		Duplicate:    true,
	}, true, nil
}
