package aggregate

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
)

// eventIDSpace is the UUIDv5 namespace of event IDs derived from command
// IDs. Changing it would make a bus of a new release re-append the events of
// a command that an old release appended just before a crash.
var eventIDSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/cairn-es/cairn/aggregate/event-id/v1"))

// EventID returns the ID of the index-th event that command commandID
// produces in stream: a UUIDv5, the same on every retry, so that a retried
// append of one decision is absorbed by the store's idempotent re-append.
func EventID(stream, commandID string, index int) uuid.UUID {
	b := make([]byte, 0, len(stream)+len(commandID)+22)
	b = append(b, stream...)
	b = append(b, 0)
	b = append(b, commandID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	return uuid.NewSHA1(eventIDSpace, b)
}

// SaveOptions say what a [Repository.Save] records with the events.
type SaveOptions struct {
	// CommandID is the ID of the command that produced the events. It is
	// recorded in their metadata, and their IDs are derived from it (see
	// [EventID]). Empty means events with new random IDs and no command ID.
	CommandID string
	// Metadata is copied into every event (its CommandID is replaced by the
	// one above).
	Metadata eventstore.Metadata
	// CommandType names the type of the command, recorded in the events'
	// metadata under [CommandTypeKey], so that a later command with the
	// same ID can be told apart when it is of another type (see
	// [Outcome.CommandType]). Empty records none.
	CommandType string
}

// CommandTypeKey is the metadata key (in [eventstore.Metadata.Extra])
// under which Save and SaveRejection record [SaveOptions.CommandType]. Keys
// starting with "cairn." are Cairn's own.
const CommandTypeKey = "cairn.command"

// metadata returns the metadata of the events that opts save.
func (opts SaveOptions) metadata() eventstore.Metadata {
	md := opts.Metadata.Clone()
	md.CommandID = opts.CommandID
	if opts.CommandType != "" {
		if md.Extra == nil {
			md.Extra = make(map[string]string, 1)
		}
		md.Extra[CommandTypeKey] = opts.CommandType
	}
	return md
}

// Outcome is what a command did to an aggregate.
type Outcome struct {
	// FirstVersion and LastVersion are the versions of the first and last
	// event the command produced.
	FirstVersion, LastVersion uint64
	// Events are the events as decoded from the store: the values that
	// replays apply, after upcasting.
	Events []any
	// Duplicate reports that the store already held these events: an
	// identical decision was appended before.
	Duplicate bool
	// Rejection, when not nil, says that the command was rejected and its
	// rejection recorded, as the one event at FirstVersion (see
	// [Repository.SaveRejection]); Events is then empty.
	Rejection *Rejection
	// Position is the global position of the command's last event: a
	// projection that has passed it shows the command's effect (see
	// projection.Consumer.WaitFor).
	Position eventstore.Position
	// CommandType is the type of the command, as its events recorded it
	// (see [SaveOptions.CommandType]); empty when they recorded none.
	CommandType string
}

// Save appends events to inst's stream, expecting inst's version, and on
// success applies them to inst, as decoded from what was appended, so that
// the state is the one a replay builds. Nothing is appended for no events.
//
// When the store reports the append as a duplicate (another dispatch of the
// same command appended its events first: their IDs derive from the command
// ID), the stored events are what happened, and they may differ from the
// events given here when the decision reads the clock or makes up IDs. The
// Outcome is then read from the store, and inst is brought up to date with
// the stream, never given the events passed in. That Outcome may be a
// recorded rejection of the command (Rejection set, no Events): another
// dispatch of it was rejected first, and that is its outcome.
//
// An event of a Go type that inst's type has no applier for (and no
// [Aggregate] fallback) is an [*UnknownEventError], and nothing is
// appended: stored, it would make the stream impossible to load.
//
// A version conflict is the store's [*eventstore.WrongVersionError]: inst is
// stale and must be loaded again. Should Apply reject an event just stored,
// the error is an [*ApplyError] and the returned Outcome is nonetheless
// filled in: the events are stored, and inst must be discarded.
func (r *Repository[T, PT]) Save(ctx context.Context, inst *Instance[T, PT], events []any, opts SaveOptions) (Outcome, error) {
	if err := checkInstance(inst); err != nil {
		return Outcome{}, err
	}
	if len(events) == 0 {
		return Outcome{}, nil
	}
	for i, e := range events {
		if isNil(e) {
			return Outcome{}, &eventstore.InvalidArgumentError{Stream: inst.Stream, Index: i, Field: "event",
				Reason: fmt.Sprintf("is nil (%d events to save): Handle must return event values", len(events))}
		}
	}
	if err := r.typ.checkEvents(inst.Stream, events); err != nil {
		return Outcome{}, err
	}
	data, err := r.reg.EncodeAll(events...)
	if err != nil {
		return Outcome{}, err
	}
	md := opts.metadata()
	for i := range data {
		if opts.CommandID != "" {
			data[i].ID = EventID(inst.Stream, opts.CommandID, i)
		}
		data[i].Metadata = md
		if i > 0 {
			data[i].Metadata = md.Clone()
		}
	}
	res, err := r.store.Append(trusted.Writer(ctx), inst.Stream, inst.Expected(), data...)
	if err != nil {
		return Outcome{}, err
	}
	if res.Duplicate {
		return r.storedOutcome(ctx, inst, opts.CommandID, res.FirstVersion)
	}
	out := Outcome{FirstVersion: res.FirstVersion, LastVersion: res.LastVersion, Duplicate: res.Duplicate, Position: res.Position,
		Events: make([]any, 0, len(data)), CommandType: opts.CommandType}
	var buf []codec.Decoded
	for i := range data {
		e := eventstore.Event{EventData: data[i], StreamID: inst.Stream, Version: res.FirstVersion + uint64(i)}
		if buf, err = r.apply(inst, &e, buf[:0]); err != nil {
			r.log.ErrorContext(ctx, "aggregate: stored events that the aggregate cannot apply",
				slog.String("stream", inst.Stream), slog.Uint64("version", e.Version), slog.Any("error", err))
			return out, err
		}
		for _, d := range buf {
			out.Events = append(out.Events, d.Value)
		}
	}
	r.maybeSnapshot(ctx, inst)
	return out, nil
}

// storedOutcome is Save's answer to a duplicate append: the outcome of
// command commandID as stored from version first on, and inst refreshed
// from the stream. The whole stored command is read, not just as many
// events as this decision had: a decision with fewer events repeats only a
// prefix of the stored ones.
func (r *Repository[T, PT]) storedOutcome(ctx context.Context, inst *Instance[T, PT], commandID string, first uint64) (Outcome, error) {
	if _, err := r.replay(ctx, inst); err != nil {
		if err == errSnapshotPastEnd {
			err = fmt.Errorf("%w: stream %q no longer has version %d, which the instance was built to", eventstore.ErrCorrupt, inst.Stream, inst.Version)
		}
		return Outcome{}, err
	}
	out, found, err := r.readOutcome(ctx, inst.Stream, commandID, span{first: first, last: eventstore.End})
	if err == nil && !found {
		err = fmt.Errorf("%w: stream %q: the store reports the events of command %q as stored from version %d, but they are not there",
			eventstore.ErrCorrupt, inst.Stream, commandID, first)
	}
	return out, err
}
