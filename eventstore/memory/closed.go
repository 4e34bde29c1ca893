package memory

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

// closing tells the parts of a [Store] that keep their own locks
// (consumers, snapshots) whether the store is closed, so that every method
// of a closed store fails with [eventstore.ErrClosed], as SQLite's and
// PostgreSQL's do.
type closing struct{ done <-chan struct{} }

// usable returns ctx's error, or ErrClosed once the store is closed.
func (c closing) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.done:
		return eventstore.ErrClosed
	default:
		return nil
	}
}
