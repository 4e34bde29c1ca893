package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
)

// Head returns the position of the newest committed event,
// [eventstore.Start] for an empty store: how far a subscriber has to read
// to be caught up. A subscriber reaches it once every transaction that was
// running when it committed has ended (see [Store.Lag]).
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.Position{}, err
	}
	var tx uint64
	var seq int64
	err := s.pool.QueryRow(ctx, s.sql.head).Scan(&tx, &seq)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return eventstore.Start, nil
	case err != nil:
		return eventstore.Position{}, s.closedOr(fmt.Errorf("postgres: reading the head: %w", err))
	}
	return eventstore.Position{Major: tx, Minor: uint64(seq)}, nil
}
