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

// message is a queue message: its ID, and the post to publish.
type message struct {
	id  string
	cmd PublishPost
}

// queue is an at-least-once queue: the publisher sends some messages twice
// (its publish was not acknowledged), and a worker that dies after its
// command took effect, before it acknowledged, gets the message back after
// the visibility timeout. The failures come on a fixed rhythm, so that every
// run shows them.
type queue struct {
	messages         chan message
	remaining        atomic.Int64  // message IDs not acknowledged yet
	done             chan struct{} // closed when remaining reaches zero
	published, twice int

	deliveries, crashes, contended atomic.Int64
}

const (
	// publishedTwiceEvery: the publisher got no acknowledgement and sent
	// the message again.
	publishedTwiceEvery = 7
	// crashEvery: the worker's command took effect, then the worker died
	// before acknowledging.
	crashEvery = 5
	// visibilityTimeout is how long a message that was not acknowledged
	// stays invisible (shortened for the example).
	visibilityTimeout = 5 * time.Millisecond
)

func newQueue(msgs []message) *queue {
	q := &queue{messages: make(chan message, 2*len(msgs)), published: len(msgs), done: make(chan struct{})}
	q.remaining.Store(int64(len(msgs)))
	for i, m := range msgs {
		q.messages <- m
		if (i+1)%publishedTwiceEvery == 0 {
			q.twice++
			q.messages <- m
		}
	}
	return q
}

// drain runs workers until every message is acknowledged; a delivery under
// way then completes, and no new one starts. Worker i belongs to the
// deployment of buses[i % len(buses)].
func (q *queue) drain(ctx context.Context, workers int, buses []*command.Bus) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var acked sync.Map // message ID -> true: a second copy's ack counts once
	var wg sync.WaitGroup
	for w := range workers {
		bus := buses[w%len(buses)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-q.done:
					return
				case m := <-q.messages:
					if err := q.deliver(ctx, bus, m, &acked); err != nil {
						cancel(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-q.done:
		return nil
	default:
		return context.Cause(ctx)
	}
}

// deliver dispatches one delivery with the message ID as the command ID, so
// that the bus recognizes a message it has seen, and acknowledges it or
// dies before acknowledging.
func (q *queue) deliver(ctx context.Context, bus *command.Bus, m message, acked *sync.Map) error {
	n := q.deliveries.Add(1)
	_, err := bus.Dispatch(ctx, command.Message{ID: m.id, Command: m.cmd})
	switch {
	case errors.Is(err, command.ErrContention):
		// The other deployment kept winning the race for the author: not
		// acknowledged, so it comes back.
		q.contended.Add(1)
		time.AfterFunc(visibilityTimeout, func() { q.messages <- m })
		return nil
	case err != nil:
		return fmt.Errorf("message %s: %w", m.id, err)
	case n%crashEvery == 0:
		q.crashes.Add(1)
		time.AfterFunc(visibilityTimeout, func() { q.messages <- m })
		return nil
	}
	if _, seen := acked.LoadOrStore(m.id, true); !seen && q.remaining.Add(-1) == 0 {
		close(q.done)
	}
	return nil
}
