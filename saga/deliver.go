package saga

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Delivery is an event that reaches a saga from outside the event store:
// from another service's broker or topic.
type Delivery struct {
	// Source names where the event comes from (a topic, a partition, the
	// sender's stream), by the rules of a stream name: not empty, at most
	// [storekit.MaxStreamLen] bytes of printable UTF-8, not starting with
	// "$". Deliveries and the store's events share one namespace of
	// sources: a delivery source must not be named as a stream whose
	// events the saga maps.
	Source string
	// Sequence numbers the source's messages for one instance 0, 1, 2, ...
	// without gaps, so that the instance can put them in order and drop
	// redeliveries. A message above the next expected one is held until
	// the missing ones arrive (or [Runner.Release] gives up on them);
	// event types mapped with AnyOrder are handled at once.
	Sequence uint64
	// ID is the event's ID, if the source gives one; it is recorded with
	// the step.
	ID uuid.UUID
	// Event is the event: a value of a type mapped with [On].
	Event any
	// Metadata travels with the event into the instance's record.
	Metadata eventstore.Metadata
}

// Deliver hands one event from outside the store to its instance, through
// the same steps as the store's events: duplicates are dropped, early
// messages held until their turn, failing handlers retried and then parked.
// When Deliver returns nil the outcome is durable, so the caller can
// acknowledge the message to its broker.
//
// The source is checked as a stream name is (not empty, at most
// [storekit.MaxStreamLen] bytes of printable UTF-8, not starting with
// "$"), and the metadata as an append checks it: a bad one is an
// [*eventstore.InvalidArgumentError] naming the field. An event of an
// unmapped type, or one whose mapping finds no instance, is a
// [*HandlerError]. An early message that the instance cannot keep within
// [MaxStepSize], beside those it holds already, is a [*RecordSizeError]
// (match [ErrRecordTooLarge]): nothing is stored, and the broker may
// deliver it again once the gap has filled. In every error case nothing
// is stored.
func (r *Runner[S]) Deliver(ctx context.Context, d Delivery) (Outcome, error) {
	t := r.e.t
	if err := storekit.ValidateStream(d.Source); err != nil {
		var bad *eventstore.InvalidArgumentError
		if errors.As(err, &bad) {
			named := *bad
			named.Field, named.Stream = "delivery source", ""
			return 0, &named
		}
		return 0, err
	}
	if err := storekit.ValidateMetadata(d.Metadata); err != nil {
		return 0, err
	}
	id, err := r.InstanceFrom(d.Event, Origin{Source: d.Source, Sequence: d.Sequence, Metadata: d.Metadata})
	if err != nil {
		return 0, &HandlerError{Saga: t.name, Message: fmt.Sprintf("delivery #%d of %q (%T)", d.Sequence, d.Source, d.Event), Err: err}
	}
	encoded, err := t.reg.EncodeValue(d.Event)
	if err != nil {
		return 0, err
	}
	payload, md := toRaw(encoded), d.Metadata.Clone()
	msg := &message{in: envelope{Source: d.Source, Sequence: d.Sequence, EventID: d.ID, Type: payload.Type, Event: &payload, Metadata: &md},
		md: eventstore.Metadata{CorrelationID: md.CorrelationID}}
	if d.ID != (uuid.UUID{}) {
		msg.md.CausationID = d.ID.String()
	}
	out, err := r.e.process(ctx, id, msg)
	return Outcome(out), err
}
