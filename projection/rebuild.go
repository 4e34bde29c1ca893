package projection

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Progress is reported during a [Consumer.Rebuild], after every batch.
type Progress struct {
	// Done counts the stored events handled so far.
	Done uint64
	// Total is how many there are to handle, when [RebuildOptions.Count]
	// asked for it; otherwise zero (unknown).
	Total uint64
	// Rate is events per second since the rebuild began.
	Rate float64
	// Elapsed is the time since the rebuild began.
	Elapsed time.Duration
}

// RebuildOptions configure a [Consumer.Rebuild]. The zero value replays
// from the start without a reset hook or progress reports.
type RebuildOptions struct {
	// From is the position to replay after; the zero value replays every
	// event.
	From eventstore.Position
	// Reset, when set, clears the read model before the checkpoint moves
	// back to From, so that an interrupted rebuild leaves a visibly short
	// read model rather than one that counts events twice. Run Rebuild
	// again after an interruption.
	Reset func(ctx context.Context) error
	// Progress, when set, is called after every batch.
	Progress func(Progress)
	// Count counts the events to replay before replaying them, for
	// [Progress.Total]. It reads the selected events once more.
	Count bool
}

// Rebuild moves the consumer's checkpoint back to opts.From and replays
// every event stored when it starts reading, then returns; a later Run goes
// on from there. It takes the lease as Run does, so a running instance of
// the same consumer elsewhere waits (or makes Rebuild wait).
func (c *Consumer) Rebuild(ctx context.Context, opts RebuildOptions) error {
	return c.rebuild(ctx, opts, func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error {
		if opts.Reset != nil {
			if err := c.guard(ctx, "Reset", nil, func() error { return opts.Reset(ctx) }); err != nil {
				return fmt.Errorf("consumer %q: resetting the read model: %w", c.name, err)
			}
		}
		return c.exec.run(ctx, func(s step) error { return s.save(from, opts.From, fence) })
	})
}

// RebuildTx is [Consumer.Rebuild] for a transactional consumer whose read
// model is reset by reset in the same transaction that moves the checkpoint
// back: a rebuild interrupted at any point leaves either the old read model
// and checkpoint or the reset ones, and a later Run or Rebuild goes on
// correctly from either. opts.Reset, if set, runs first, outside it. c must
// come from [NewTx] with the same Tx, or RebuildTx returns an error
// matching [eventstore.ErrInvalidArgument].
func RebuildTx[Tx any](ctx context.Context, c *Consumer, reset func(ctx context.Context, tx Tx) error, opts RebuildOptions) error {
	x, ok := c.exec.(txExecutor[Tx])
	if !ok {
		var tx Tx
		return fmt.Errorf("%w: consumer %q is not a transactional consumer with transactions of type %T",
			eventstore.ErrInvalidArgument, c.name, tx)
	}
	return c.rebuild(ctx, opts, func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error {
		if opts.Reset != nil {
			if err := c.guard(ctx, "Reset", nil, func() error { return opts.Reset(ctx) }); err != nil {
				return fmt.Errorf("consumer %q: resetting the read model: %w", c.name, err)
			}
		}
		return x.inTx(ctx, func(ctx context.Context, tx Tx) error {
			if err := c.guard(ctx, "RebuildTx reset", nil, func() error { return reset(ctx, tx) }); err != nil {
				return fmt.Errorf("consumer %q: resetting the read model: %w", c.name, err)
			}
			return x.store.SaveCheckpointTx(ctx, tx, c.name, from, opts.From, fence)
		})
	})
}

// rebuild runs a rebuild whose reset and checkpoint move is moveBack, in a
// `rebuild {consumer}` span that its batches' spans link to.
func (c *Consumer) rebuild(ctx context.Context, opts RebuildOptions, moveBack func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error) (err error) {
	ctx, span := c.startRebuild(ctx)
	var done uint64
	defer func() { endRebuild(ctx, span, done, err) }()
	_, err = c.session(ctx, c.sessionHolder(), func(ctx context.Context, from eventstore.Position, fence storekit.Fence) error {
		var total uint64
		if opts.Count {
			for _, err := range c.events.ReadAll(ctx, opts.From, c.opts.Filter) {
				if err != nil {
					return fmt.Errorf("consumer %q: counting events to rebuild: %w", c.name, err)
				}
				total++
			}
		}
		if err := moveBack(ctx, from, fence); err != nil {
			return fmt.Errorf("consumer %q: moving the checkpoint back to %s: %w", c.name, opts.From, err)
		}
		c.stats.setCheckpoint(opts.From)
		start := time.Now()
		report := func(n int) error {
			done += uint64(n)
			if opts.Progress == nil {
				return nil
			}
			el := time.Since(start)
			p := Progress{Done: done, Total: max(total, done), Elapsed: el}
			if !opts.Count {
				p.Total = 0
			}
			if el > 0 {
				p.Rate = float64(done) / el.Seconds()
			}
			return c.guard(ctx, "Progress", nil, func() error { opts.Progress(p); return nil })
		}
		_, err := c.consume(ctx, func(ctx context.Context) iter.Seq2[eventstore.Event, error] {
			return c.events.ReadAll(ctx, opts.From, c.opts.Filter)
		}, opts.From, fence, report)
		return err
	})
	return err
}
