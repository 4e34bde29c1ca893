package main

import (
	"context"
	"sync"
	"time"
)

// message is what the external queue carries: an ID the publisher gave it,
// and a body.
type message struct {
	ID   string
	Body AwardPoints
}

// broker is an external at-least-once queue in the manner of a cloud queue
// (SQS, Azure Service Bus, Pub/Sub): a received message is hidden for the
// visibility timeout and comes back unless it is acknowledged in time. It
// loses what real queues lose, on a fixed rhythm so that every run shows
// each failure:
//
//   - every publishAckEvery-th publish stores the message but its
//     acknowledgement never reaches the publisher, which publishes the same
//     message (same ID) again: the queue then holds two copies;
//   - every ackLostEvery-th acknowledgement is lost on its way to the queue,
//     so the message comes back after the timeout although the worker
//     finished with it.
type broker struct {
	visibility time.Duration

	mu      sync.Mutex
	entries []*entry // copies not yet acknowledged

	// Figures, under mu.
	published, republished, receives, redeliveries, acks, lostAcks int
}

type entry struct {
	msg       message
	visibleAt time.Time
	receives  int
}

// receipt identifies one receive of one copy, as a cloud queue's receipt
// handle does.
type receipt struct{ e *entry }

const (
	publishAckEvery = 8
	ackLostEvery    = 6
)

func newBroker(visibility time.Duration) *broker {
	return &broker{visibility: visibility}
}

// publish stores m, and stores it once more when its acknowledgement is
// "lost": the publisher cannot tell a lost message from a lost reply, so it
// sends again.
func (b *broker) publish(m message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published++
	b.entries = append(b.entries, &entry{msg: m})
	if b.published%publishAckEvery == 0 {
		b.republished++
		b.entries = append(b.entries, &entry{msg: m})
	}
}

// receive returns the next visible message and hides it for the visibility
// timeout. It waits while every remaining copy is hidden (in flight at some
// worker, which may never acknowledge it), and returns false once every
// copy has been acknowledged.
func (b *broker) receive(ctx context.Context) (message, receipt, bool) {
	for {
		b.mu.Lock()
		if len(b.entries) == 0 {
			b.mu.Unlock()
			return message{}, receipt{}, false
		}
		now := time.Now()
		for _, e := range b.entries {
			if e.visibleAt.After(now) {
				continue
			}
			e.visibleAt = now.Add(b.visibility)
			e.receives++
			b.receives++
			if e.receives > 1 {
				b.redeliveries++
			}
			b.mu.Unlock()
			return e.msg, receipt{e}, true
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return message{}, receipt{}, false
		case <-time.After(b.visibility / 10):
		}
	}
}

// ack deletes the copy r received, unless the acknowledgement is lost.
// The worker cannot tell either way.
func (b *broker) ack(r receipt) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acks++
	if b.acks%ackLostEvery == 0 {
		b.lostAcks++
		return
	}
	for i, e := range b.entries {
		if e == r.e {
			b.entries = append(b.entries[:i], b.entries[i+1:]...)
			return
		}
	}
}
