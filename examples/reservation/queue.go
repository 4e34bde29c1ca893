package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/command"
)

// queue is an at-least-once message queue between the customers' clients
// and the service, as unreliable as real ones: a publisher that got no
// acknowledgement sends a message twice, a worker crashes after its command
// took effect but before it acknowledged (so the message comes back), and
// a client's messages arrive in another order than it sent them.
type queue struct {
	messages chan message
	// open counts the deliveries enqueued and not yet handled, redeliveries
	// included: the queue is drained when it reaches zero.
	open  sync.WaitGroup
	stats queueStats
	// applied counts the messages that took effect so far.
	applied atomic.Int64
}

// queueStats are what the queue did. The faults (SentTwice, Crashed,
// Reordered) are planned when the messages are published, so a seed
// fixes them.
type queueStats struct {
	Messages, SentTwice, Crashed, Reordered int
	// Deliveries counts every delivery to a worker; Applied the commands
	// that took effect, Duplicates the deliveries the bus recognized as
	// done already, PutBack those put back after losing races for their
	// aggregate too often, Refused those their aggregate refused.
	Deliveries, Applied, Duplicates, PutBack, Refused int
}

type message struct {
	id  string
	cmd command.Command
	// crash makes the worker of the first delivery crash after the
	// command took effect, before it acknowledges.
	crash bool
}

// visibilityTimeout is how long a message that was not acknowledged stays
// invisible before it is delivered again, as in a cloud queue (shortened).
const visibilityTimeout = 20 * time.Millisecond

// plan turns each order into the messages its client sends, with the
// faults the queue will inject, drawn from rng.
func plan(orders []order, commands func(order) []message, rng *rand.Rand) ([][]message, queueStats) {
	var s queueStats
	sends := make([][]message, len(orders))
	for i, o := range orders {
		msgs := commands(o)
		if len(msgs) == 2 && rng.IntN(4) == 0 { // the authorization overtakes the order
			msgs[0], msgs[1] = msgs[1], msgs[0]
			s.Reordered++
		}
		var out []message
		for _, m := range msgs {
			m.crash = rng.IntN(8) == 0
			out = append(out, m)
			if rng.IntN(10) == 0 {
				out = append(out, message{id: m.id, cmd: m.cmd}) // published again
				s.SentTwice++
			}
			if m.crash {
				s.Crashed++
			}
			s.Messages++
		}
		sends[i] = out
	}
	return sends, s
}

// run has clients publish sends (clients at once, each its share of the
// orders in turn, one every pace) while workers dispatch through bus,
// until every message is acknowledged and every duplicate delivered.
func (q *queue) run(ctx context.Context, bus *command.Bus, sends [][]message, clients, workers int, pace time.Duration) (queueStats, error) {
	total := 0
	for _, s := range sends {
		total += len(s)
	}
	q.messages = make(chan message, 2*total+1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var counts struct{ deliveries, duplicates, putBack, refused atomic.Int64 }
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-q.messages:
					counts.deliveries.Add(1)
					res, err := bus.Dispatch(ctx, command.Message{ID: m.id, Command: m.cmd})
					switch {
					case errors.Is(err, command.ErrContention):
						// Lost the race for its aggregate too often: back
						// after the timeout, like any unacknowledged message.
						counts.putBack.Add(1)
						q.redeliver(m)
					case res.Rejected:
						counts.refused.Add(1) // the client is told no, and acknowledges
					case err != nil:
						cancel(fmt.Errorf("message %s (%T): %w", m.id, m.cmd, err))
					default:
						if res.Duplicate {
							counts.duplicates.Add(1)
						} else {
							q.applied.Add(1)
						}
						// The command has taken effect (by this delivery or an
						// earlier one); a crash now loses the acknowledgement.
						if m.crash {
							m.crash = false
							q.redeliver(m)
						}
					}
					q.open.Done()
				}
			}
		}()
	}
	var publishing sync.WaitGroup
	for c := range clients {
		publishing.Add(1)
		go func() {
			defer publishing.Done()
			for i := c; i < len(sends); i += clients {
				for _, m := range sends[i] {
					q.open.Add(1)
					q.messages <- m
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(pace):
				}
			}
		}()
	}
	publishing.Wait()
	drained := make(chan struct{})
	go func() { q.open.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
	}
	cancel(nil)
	wg.Wait()
	q.stats.Deliveries = int(counts.deliveries.Load())
	q.stats.Applied = int(q.applied.Load())
	q.stats.Duplicates = int(counts.duplicates.Load())
	q.stats.PutBack = int(counts.putBack.Load())
	q.stats.Refused = int(counts.refused.Load())
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return q.stats, err
	}
	return q.stats, nil
}

// redeliver puts m back after the visibility timeout.
func (q *queue) redeliver(m message) {
	q.open.Add(1)
	time.AfterFunc(visibilityTimeout, func() { q.messages <- m })
}
