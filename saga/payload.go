package saga

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Records keep stored events by reference: a message that comes back out
// of a record (the parked one retried, a rejection held, a step replayed)
// reads its payload again from where it is stored.

// storedEvent reads the event at version of stream, through the engine's
// reader when it has one.
func (e *engine[S]) storedEvent(ctx context.Context, stream string, version uint64) (eventstore.Event, bool, error) {
	if e.events != nil {
		return e.events(ctx, stream, version)
	}
	for ev, err := range e.store.ReadStream(ctx, stream, eventstore.ReadOptions{From: version, Limit: 1}) {
		if err != nil {
			return eventstore.Event{}, false, err
		}
		return ev, ev.Version == version, nil
	}
	return eventstore.Event{}, false, nil
}

// decodeEvent upcasts and decodes the event of msg: one value, or several
// when an upcaster splits it, all handled in one step. A stored event
// referred to by a record is read again, and must be the one the record
// names. An event that does not decode, or is not where the record says,
// is herr; err is the store's.
func (e *engine[S]) decodeEvent(ctx context.Context, msg *message) (values []codec.Decoded, herr, err error) {
	if msg.values != nil {
		return msg.values, nil, nil
	}
	if msg.event == nil && msg.in.Event == nil {
		ev, found, err := e.storedEvent(ctx, msg.in.Source, msg.in.Sequence)
		switch {
		case err != nil:
			return nil, nil, err
		case !found || ev.ID != msg.in.EventID:
			return nil, fmt.Errorf("%w: %s is not found where the instance's record names it (event ID %s)",
				eventstore.ErrCorrupt, msg, msg.in.EventID), nil
		}
		msg.event = &ev
	}
	ev := msg.event
	if ev == nil {
		md := eventstore.Metadata{}
		if msg.in.Metadata != nil {
			md = *msg.in.Metadata
		}
		ev = &eventstore.Event{
			EventData: eventstore.EventData{ID: msg.in.EventID, Type: msg.in.Event.Type, SchemaVersion: msg.in.Event.Version,
				Data: msg.in.Event.Data, Metadata: md},
			StreamID: msg.in.Source, Version: msg.in.Sequence, Position: msg.in.Position,
		}
	}
	values, err = e.t.reg.Decode(*ev)
	if err != nil {
		return nil, err, nil
	}
	msg.values = values
	return values, nil, nil
}

// rejectedCommand decodes the command whose rejection msg is: from the
// message, or from the record that sent it. A command that no longer
// decodes is herr.
func (e *engine[S]) rejectedCommand(ctx context.Context, in *instance[S], msg *message) (cmd any, herr, err error) {
	c := msg.command
	if c == nil {
		c = msg.in.Event // a version 1 record kept it inline
	}
	if c == nil {
		sent, found, err := e.sentCommand(ctx, in.stream, msg.in.Sent, msg.in.Command)
		switch {
		case err != nil:
			return nil, nil, err
		case !found:
			return nil, fmt.Errorf("command %s is not in record %d of %q, which sent it", msg.in.Command, msg.in.Sent, in.stream), nil
		}
		c = &sent.Command
	}
	v, err := e.t.reg.DecodeValue(c.upcast())
	if err != nil {
		return nil, err, nil
	}
	return v, nil, nil
}

// sentCommand returns command id of the record at version of stream.
func (e *engine[S]) sentCommand(ctx context.Context, stream string, version uint64, id string) (sentCommand, bool, error) {
	ev, found, err := e.storedEvent(ctx, stream, version)
	if err != nil || !found {
		return sentCommand{}, false, err
	}
	rec, err := decodeOutline(ev)
	if err != nil {
		return sentCommand{}, false, err
	}
	for _, c := range rec.Commands {
		if c.ID == id {
			return c, true, nil
		}
	}
	return sentCommand{}, false, nil
}
