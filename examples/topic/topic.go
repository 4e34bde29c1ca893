package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/saga"
)

// message is a message on the carrier's topic. Offset numbers the topic's
// messages, all parcels together, from 1; Seq numbers one parcel's messages
// 0, 1, 2, ...: the per-key sequence the carrier stamps on its events, which
// is what a saga's Delivery.Sequence needs (the topic's offset has gaps from
// one parcel's point of view).
type message struct {
	Offset uint64
	ID     uuid.UUID
	Seq    uint64
	Event  ParcelScanned
}

// topic is a reliable topic in the manner of Kafka or NATS JetStream, kept in
// memory: an ordered log that a subscriber reads from an offset, and that
// keeps the offset the subscriber last acknowledged.
type topic struct {
	name     string
	messages []message
	// late is the offset of the message whose first publish failed and
	// was retried after a later message of its parcel, at offset overtaken,
	// had gone out.
	late, overtaken uint64
}

// publish fills the topic: each parcel is scanned at every stage, parcels
// interleaved at random. One scan, "out for delivery" of a parcel picked for
// it, is published asynchronously, fails, and is published again a dozen
// messages after the parcel's "delivered" went out: the topic then holds the
// parcel's sequence 3 before its sequence 2.
func publish(name, prefix string, parcels int, rng *rand.Rand) *topic {
	t := &topic{name: name}
	add := func(m message) uint64 {
		m.Offset = uint64(len(t.messages) + 1)
		t.messages = append(t.messages, m)
		return m.Offset
	}
	next := make([]int, parcels) // the next stage of each parcel
	var open []int               // parcels with stages left
	for p := range parcels {
		open = append(open, p)
	}
	victim := parcels / 3
	var withheld []message
	for len(open) > 0 {
		if len(withheld) > 0 && t.overtaken > 0 && uint64(len(t.messages)) >= t.overtaken+12 {
			t.late = add(withheld[0])
			withheld = nil
		}
		i := rng.IntN(len(open))
		p := open[i]
		stage := next[p]
		next[p]++
		if next[p] == len(stages) {
			open = append(open[:i], open[i+1:]...)
		}
		m := message{ID: uuid.New(), Seq: uint64(stage), Event: ParcelScanned{
			Parcel: fmt.Sprintf("%s.p%02d", prefix, p+1),
			Order:  fmt.Sprintf("%s.o%02d", prefix, p+1),
			Stage:  stage,
			Where:  []string{"depot", fmt.Sprintf("hub %c", 'A'+rng.IntN(4)), "van", "doorstep"}[stage],
		}}
		switch {
		case p == victim && stage == 2:
			withheld = append(withheld, m)
		case p == victim && stage == 3:
			t.overtaken = add(m)
		default:
			add(m)
		}
	}
	if len(withheld) > 0 {
		t.late = add(withheld[0])
	}
	return t
}

// ackEvery is how often the subscriber acknowledges: after every eighth
// message, as clients that commit offsets in batches do. A session that ends
// between two acknowledgements leaves the messages since the last one to be
// delivered again.
const ackEvery = 8

// dropPoint is where the example's connection drops: just before the first
// acknowledgement after the overtaking message, so that the messages since
// the last one (the overtaking one among them, most often) are delivered
// again; and before the late message, so that the gap stays open across the
// reconnect.
func (t *topic) dropPoint() uint64 {
	next := (t.overtaken/ackEvery + 1) * ackEvery // the first ack after it
	drop := next - 1
	if drop <= t.overtaken {
		drop += ackEvery
	}
	return max(min(drop, t.late-1), t.overtaken)
}

// subscriber reads the topic into the saga: each message is handed to
// Runner.Deliver with the parcel's sequence, and acknowledged once Deliver
// has returned (its outcome is then durable).
type subscriber struct {
	topic  *topic
	runner *saga.Runner[Tracking]
	acked  uint64 // kept by the topic: where a new session resumes

	sessions, deliveries int
	outcomes             map[saga.Outcome]int
	// gapOpened and gapFilled are the offsets after whose delivery
	// Runner.Gaps first listed a gap, and then listed none again; gapSeen
	// is the gap as it was listed.
	gapOpened, gapFilled uint64
	gapSeen              saga.Gap
}

// session connects, resumes after the last acknowledged offset, and reads
// until the connection drops after offset dropAfter (0: it never drops).
func (s *subscriber) session(ctx context.Context, dropAfter uint64) (resumedAfter uint64, err error) {
	s.sessions++
	resumedAfter = s.acked
	for _, m := range s.topic.messages[s.acked:] {
		out, err := s.runner.Deliver(ctx, saga.Delivery{
			Source:   s.topic.name,
			Sequence: m.Seq,
			ID:       m.ID,
			Event:    m.Event,
		})
		if err != nil {
			return resumedAfter, fmt.Errorf("offset %d: %w", m.Offset, err)
		}
		s.deliveries++
		s.outcomes[out]++
		gaps := s.runner.Gaps()
		switch {
		case len(gaps) > 0 && s.gapOpened == 0:
			s.gapOpened, s.gapSeen = m.Offset, gaps[0]
		case len(gaps) == 0 && s.gapOpened != 0 && s.gapFilled == 0:
			s.gapFilled = m.Offset
		}
		if m.Offset%ackEvery == 0 || m.Offset == uint64(len(s.topic.messages)) {
			s.acked = m.Offset
		}
		if m.Offset == dropAfter {
			return resumedAfter, nil
		}
	}
	return resumedAfter, nil
}
