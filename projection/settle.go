package projection

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

// Waiter is what [Settle] waits on: a [*Consumer], or a saga.Runner (its
// events consumers and outboxes).
type Waiter interface {
	// WaitFor returns once everything the waiter selects up to and
	// including pos is handled.
	WaitFor(ctx context.Context, pos eventstore.Position) error
}

// Settle returns once the waiters have handled everything stored, and
// everything that handling stored in turn: it waits for each to reach the
// store's head, then reads the head again, and is done when it has not
// moved. So a test (or a service that answers from a read model fed by a
// saga) waits until a command's whole cascade is through: the saga's
// steps, the commands its outbox sent, their events, and the projections
// behind them. It waits as long as something keeps storing, and while a
// waiter runs nowhere: bound it with ctx. Deadlines are not waited for,
// neither those that fall due later nor one due that a runner has yet to
// fire: fire them (saga.Runner.FireDue, or a moved test clock and
// CatchUp), then settle again.
func Settle(ctx context.Context, store HeadReader, waiters ...Waiter) error {
	head, err := store.Head(ctx)
	if err != nil {
		return err
	}
	for {
		for _, w := range waiters {
			if err := w.WaitFor(ctx, head); err != nil {
				return err
			}
		}
		now, err := store.Head(ctx)
		if err != nil {
			return err
		}
		if now == head {
			return nil
		}
		head = now
	}
}
