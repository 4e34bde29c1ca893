package saga

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/projection"
)

// settlePoll bounds each wait of settle, so that it notices a segment this
// process stops running.
const settlePoll = time.Second

// settle waits until this runner's events consumers have handled every
// event stored when it is called. Run calls it before firing deadlines, so
// that a deadline due at T never fires ahead of an event stored before T
// that the runner had yet to handle: after a restart, or behind a backlog,
// "no payment within 15 minutes" must not overtake the payment. Segments
// this process does not run are not waited for (their owner fires their
// deadlines), and a store that cannot tell its head is not waited on.
func (r *Runner[S]) settle(ctx context.Context) error {
	h, ok := r.e.store.(projection.HeadReader)
	c := r.consumers.Load()
	if !ok || c == nil {
		return nil
	}
	head, err := h.Head(ctx)
	if err != nil {
		return err
	}
	for k, seg := range c.segs {
		for !seg.external && r.timers.isActive(k) {
			wait, cancel := context.WithTimeout(ctx, settlePoll)
			err := seg.events.WaitFor(wait, head)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
		}
	}
	return nil
}

// WaitFor returns once the saga has handled everything up to and
// including position pos: every segment's events consumer has taken the
// events it maps up to pos into their instances' steps, and every
// segment's outbox has sent the commands of the step records up to pos.
// It reads the stored checkpoints, so the runners may run in this process
// or another; it waits while none runs, until ctx ends. To wait for the
// whole cascade a command starts (steps, commands, their events, more
// steps), pass the runner to projection.Settle.
func (r *Runner[S]) WaitFor(ctx context.Context, pos eventstore.Position) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	for _, seg := range c.segs {
		if seg.external {
			// The caller hands the events over: nothing of the store's to
			// wait for but the outbox.
		} else if err := seg.events.WaitFor(ctx, pos); err != nil {
			return err
		}
		if err := seg.outbox.WaitFor(ctx, pos); err != nil {
			return err
		}
	}
	return nil
}
