package projection

import (
	"context"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// waitPoll bounds how long WaitFor goes without looking at the stored
// checkpoint, for a consumer that runs in another process: one in this
// process wakes it at once when it moves its checkpoint.
const waitPoll = 100 * time.Millisecond

// WaitFor returns once the consumer has handled every event it selects up
// to and including pos — the position of a command's last event
// (command.Result.Position) or of an append — so that a read model queried
// next shows that command's effect: read-your-writes for a service that
// answers a request with its read model.
//
// It reads the stored checkpoint, so the consumer may run in this process
// or in another one (under a lease); only reaching pos is waited for, not
// the rest of a batch. The events up to pos that the consumer's filter
// leaves out are not waited for. It returns ctx's error when ctx ends
// first: give it a deadline, since a consumer that is not running anywhere
// never gets there.
func (c *Consumer) WaitFor(ctx context.Context, pos eventstore.Position) error {
	for {
		moved := c.stats.moved.Changed()
		done, err := c.reached(ctx, pos)
		if err != nil || done {
			return err
		}
		timer := time.NewTimer(waitPoll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-moved:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// reached reports whether the stored checkpoint has passed every event the
// consumer selects at or before pos.
func (c *Consumer) reached(ctx context.Context, pos eventstore.Position) (bool, error) {
	cp, err := c.checkpoints.Checkpoint(ctx, c.name)
	if err != nil {
		return false, err
	}
	if !cp.Position.Before(pos) {
		return true, nil
	}
	// The checkpoint stays on the last selected event while the events after
	// it are left out by the filter: the consumer is there when no selected
	// event lies between the checkpoint and pos.
	for ev, err := range c.events.ReadAll(ctx, cp.Position, c.opts.Filter) {
		if err != nil {
			return false, err
		}
		return pos.Before(ev.Position), nil
	}
	return true, nil
}
