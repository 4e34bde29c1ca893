package projection

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/telemetry"
)

// Components that handle stored events in batches their own way (a saga
// runner) make their consumers through internal/batchconsumer.
func init() { batchconsumer.Register(newBatch) }

// newBatch returns a consumer that hands h each batch of the events that
// opts.Filter selects, keeps its checkpoint in checkpoints under name, and
// calls onClaim at the start of each session (see batchconsumer.New).
func newBatch(name string, events eventstore.Store, checkpoints storekit.CheckpointStore, h batchconsumer.Handler, onClaim batchconsumer.OnClaim, opts Options) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %q: nil handler", eventstore.ErrInvalidArgument, name)
	}
	opts.DeadLetters, opts.OnFailure = nil, Stop
	c, err := newConsumer(name, events, nil, checkpoints, opts)
	if err != nil {
		return nil, err
	}
	c.batch, c.onClaim = h, onClaim
	c.exec = plainExecutor{c: c}
	// A batch consumer parks nothing: its component keeps its own account
	// of what fails (a saga parks an instance).
	c.registerGauges(nil)
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
		err := c.guard(ctx, "batch handler", &events[0], func() error { return c.batch(ctx, events) })
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
		traceRetry(ctx, attempt, err)
		c.log.WarnContext(ctx, "projection: batch failed; retrying", slog.Int("events", len(events)),
			slog.String(telemetry.LogPosition, first.Position.String()), slog.Int("attempt", attempt), slog.Any(telemetry.LogError, err))
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
