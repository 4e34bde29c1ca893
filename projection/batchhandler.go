package projection

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/failpoint"
)

// BatchHandler handles a batch of stored events, in position order, as
// they are stored (nothing is decoded for it). The checkpoint moves past
// the batch only after it returns nil. An error fails the whole batch,
// which is handled again, so a BatchHandler must be idempotent; it keeps
// its own account of events that fail alone (a saga parks them in the
// instance they belong to).
type BatchHandler func(ctx context.Context, events []eventstore.Event) error

// NewBatch returns a consumer that hands h each batch of the events that
// opts.Filter selects, and keeps its checkpoint in checkpoints under name.
// It is the checkpointed loop under components that handle events in
// their own way, such as a saga runner that steps many instances of a
// batch in parallel. A live event is handed over as soon as no further one
// is waiting, rather than after opts.MaxBatchDelay.
//
// A batch that fails is retried with opts.Retry; when its attempts run
// out, Run and CatchUp return a [*HandlerError] naming the batch's first
// event. opts.OnFailure and opts.DeadLetters do not apply.
func NewBatch(name string, events eventstore.Store, checkpoints storekit.CheckpointStore, h BatchHandler, opts Options) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %q: nil handler", eventstore.ErrInvalidArgument, name)
	}
	opts.DeadLetters, opts.OnFailure = nil, Stop
	c, err := newConsumer(name, events, nil, checkpoints, opts)
	if err != nil {
		return nil, err
	}
	c.batch = h
	c.exec = plainExecutor{c: c}
	return c, nil
}

// flushBatch hands a batch to the consumer's BatchHandler, retrying it
// while it fails, then moves the checkpoint past it.
func (c *Consumer) flushBatch(ctx context.Context, batch []unit, from eventstore.Position, fence storekit.Fence) (eventstore.Position, error) {
	events := make([]eventstore.Event, len(batch))
	for i, u := range batch {
		events[i] = u.ev
	}
	for attempt := 1; ; attempt++ {
		err := c.guard("batch handler", &events[0], func() error { return c.batch(ctx, events) })
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return from, ctx.Err()
		}
		first := events[0]
		if attempt >= c.opts.attempts() {
			return from, &HandlerError{Consumer: c.name, Stream: first.StreamID, Version: first.Version, Position: first.Position,
				Type: first.Type, Attempts: attempt, Err: err}
		}
		c.log.WarnContext(ctx, "projection: batch failed; retrying", slog.Int("events", len(events)),
			slog.String("from", first.Position.String()), slog.Int("attempt", attempt), slog.Any("error", err))
		if err := backoff.Wait(ctx, c.opts.delay(attempt)); err != nil {
			return from, err
		}
	}
	to := events[len(events)-1].Position
	failpoint.Hit(failpoint.CheckpointBeforeSave)
	if err := c.checkpoints.SaveCheckpoint(ctx, c.name, from, to, fence); err != nil {
		return from, err
	}
	failpoint.Hit(failpoint.CheckpointAfterSave)
	c.stats.checkpointed(from, to, len(events), events[len(events)-1].RecordedAt)
	return to, nil
}
