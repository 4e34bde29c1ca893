package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/command"
)

// The workers' own failures, on a fixed rhythm of their deliveries.
const (
	// crashEvery: the worker's command commits, then the worker dies before
	// it acknowledges (its replacement takes the next message).
	crashEvery = 7
	// stallEvery: the worker stalls (a long GC pause, a slow disk) for
	// three visibility timeouts before it dispatches, so that the queue
	// hands the message to another worker meanwhile.
	stallEvery = 23
)

// consumer runs the service's workers against the queue.
type consumer struct {
	queue *broker

	deliveries, crashes, stalls, overlaps, contended atomic.Int64
	inFlight                                         sync.Map // message ID -> *atomic.Int64 workers holding it
}

// drain runs workers until every copy in the queue is acknowledged; worker
// i dispatches through buses[i % len(buses)].
func (c *consumer) drain(ctx context.Context, workers int, buses []*command.Bus) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.work(ctx, buses[w%len(buses)]); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

func (c *consumer) work(ctx context.Context, bus *command.Bus) error {
	for {
		m, rcpt, ok := c.queue.receive(ctx)
		if !ok {
			return ctx.Err()
		}
		n := c.deliveries.Add(1)
		holders, _ := c.inFlight.LoadOrStore(m.ID, new(atomic.Int64))
		if holders.(*atomic.Int64).Add(1) > 1 {
			c.overlaps.Add(1)
		}
		if n%stallEvery == 0 {
			c.stalls.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(3 * c.queue.visibility):
			}
		}
		// The one line that makes the queue exactly-once: the message ID
		// is the command ID.
		_, err := bus.Dispatch(ctx, command.Message{ID: m.ID, Command: m.Body})
		holders.(*atomic.Int64).Add(-1)
		switch {
		case errors.Is(err, command.ErrContention):
			// The other replica kept winning the race for the account: no
			// acknowledgement, so the queue delivers the message again.
			c.contended.Add(1)
			continue
		case err != nil:
			return fmt.Errorf("message %s: %w", m.ID, err)
		case n%crashEvery == 0:
			c.crashes.Add(1)
			continue
		}
		c.queue.ack(rcpt)
	}
}

// busStats counts what the buses did, through their Observing middleware.
type busStats struct {
	applied, duplicates, conflicts atomic.Int64
}

func (s *busStats) observe() command.Middleware {
	return command.Observing(func(_ context.Context, o command.Observation) {
		if o.Err != nil {
			return
		}
		if o.Result.Duplicate {
			s.duplicates.Add(1)
		} else {
			s.applied.Add(1)
		}
		s.conflicts.Add(int64(o.Result.Attempts - 1))
	})
}
