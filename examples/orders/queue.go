package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/command"
)

// queue is an at-least-once message queue, as unreliable as real ones: the
// publisher sends some messages twice, workers "crash" after the command
// took effect but before acknowledging (the message comes back), and a
// message the order cannot take yet (it arrived out of order) is put back.
type queue struct {
	messages  chan message
	pending   sync.WaitGroup // one per published message, done on ack
	published int
	workers   int

	deliveries, putBack, contended atomic.Int64
}

// visibilityTimeout is how long a message that was put back stays
// invisible, as in a cloud queue (shortened for the demo).
const visibilityTimeout = 5 * time.Millisecond

type message struct {
	id  string
	cmd command.Command
}

func newQueue(orders, workers int) *queue {
	var msgs []message
	for i := range orders {
		id := uuid.NewString()[:8]
		total := int64(1000 + rand.IntN(20000))
		msgs = append(msgs,
			message{uuid.NewString(), PlaceOrder{OrderID: id, Customer: fmt.Sprintf("customer-%d", i%17), Lines: 1 + i%4, TotalCents: total}},
			message{uuid.NewString(), PayOrder{OrderID: id, AmountCents: total}},
			message{uuid.NewString(), ShipOrder{OrderID: id, Carrier: "parcelco"}},
		)
	}
	// Delivery order is not publishing order.
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })

	q := &queue{messages: make(chan message, 2*len(msgs)), published: len(msgs), workers: workers}
	for _, m := range msgs {
		q.pending.Add(1)
		q.messages <- m
		if rand.IntN(10) == 0 { // the publisher got no ack and sent it again
			q.messages <- m
		}
	}
	return q
}

// drain runs the workers until every published message is acknowledged.
// Worker i dispatches through buses[i % len(buses)].
func (q *queue) drain(ctx context.Context, buses ...*command.Bus) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	acked := sync.Map{} // message ID -> true, so a duplicate's ack counts once
	var workers sync.WaitGroup
	for w := range q.workers {
		bus := buses[w%len(buses)]
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-q.messages:
					q.deliveries.Add(1)
					if err := q.deliver(ctx, bus, m, &acked); err != nil {
						cancel(err)
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { q.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	cancel(nil)
	workers.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// deliver dispatches one delivery of m with the message ID as the command
// ID, so that redeliveries are recognized, and acknowledges, puts back or
// "crashes" as a worker of a real queue would.
func (q *queue) deliver(ctx context.Context, bus *command.Bus, m message, acked *sync.Map) error {
	_, err := bus.Dispatch(ctx, command.Message{ID: m.id, Command: m.cmd})
	switch {
	case errors.Is(err, ErrNotPlaced), errors.Is(err, ErrNotPaid):
		q.putBack.Add(1)
		time.AfterFunc(visibilityTimeout, func() { q.messages <- m })
		return nil
	case errors.Is(err, command.ErrContention):
		// The other deployment kept winning the race for this order: not
		// a failure of the message, so it comes back after the timeout.
		q.contended.Add(1)
		time.AfterFunc(visibilityTimeout, func() { q.messages <- m })
		return nil
	case err != nil:
		return fmt.Errorf("message %s (%T): %w", m.id, m.cmd, err)
	case rand.IntN(8) == 0:
		q.messages <- m // crashed after the effect, before the ack: redelivered
		return nil
	}
	if _, seen := acked.LoadOrStore(m.id, true); !seen {
		q.pending.Done()
	}
	return nil
}
