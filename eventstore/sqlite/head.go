package sqlite

import (
	"context"

	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

// Head returns the position of the newest event, [eventstore.Start] for an
// empty store: how far a subscriber has to read to be caught up.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := s.readable(ctx); err != nil {
		return eventstore.Position{}, err
	}
	var tip int64
	err := s.events.with(ctx, func(conn *zs.Conn) error {
		stmt, err := conn.Prepare(sqlTip)
		if err != nil {
			return err
		}
		defer func() { _ = stmt.Reset() }()
		if _, err := stmt.Step(); err != nil {
			return err
		}
		tip = stmt.ColumnInt64(0)
		return nil
	})
	if err != nil {
		return eventstore.Position{}, s.readErr(ctx, err, "read the head")
	}
	return eventstore.Position{Major: uint64(tip)}, nil
}
