package memory

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

// Head returns the position of the newest event, [eventstore.Start] for an
// empty store: how far a subscriber has to read to be caught up.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.Position{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return eventstore.Position{}, eventstore.ErrClosed
	}
	if s.log.n > 0 {
		return s.log.last().Position, nil
	}
	return eventstore.Start, nil
}
