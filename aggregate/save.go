package aggregate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/clip"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/trusted"
)

// SaveOptions say what a [Repository.Save] records with the events.
type SaveOptions struct {
	// CommandID is the ID of the command that produced the events. It is
	// recorded in their metadata, and their IDs are derived from it, so
	// that the same decision appended again is absorbed by the store, and
	// the command's events appended at another place are refused (see
	// [Repository.Save]). Empty means events with new random IDs and no
	// command ID.
	CommandID string
	// Metadata is copied into every event (its CommandID is replaced by the
	// one above). Its Extra keys must not start with "cairn.": those are
	// the keys Cairn sets itself, such as the trace context
	// ([eventstore.TraceParentKey]).
	Metadata eventstore.Metadata
}

// metadata returns the metadata of the events that opts save in the
// append op: when its span records, its context is recorded too, so that
// whoever handles the events links to the append that stored them. All
// events of one append share the one context, so it is set before the
// metadata is copied into each. Both arguments are large structs, passed
// by address rather than copied in.
func metadata(op *telemetry.Append, opts *busrepo.SaveOptions) eventstore.Metadata {
	md := opts.Metadata
	if md.Extra != nil {
		md = md.Clone() // without Extra, md is already a copy
	}
	md.CommandID = opts.CommandID
	if opts.CommandType != "" {
		if md.Extra == nil {
			md.Extra = make(map[string]string, 3)
		}
		md.Extra[busrepo.CommandTypeKey] = opts.CommandType
	}
	op.Inject(&md)
	return md
}

// ownKey returns a key of md that only Cairn sets (a trace context, a
// command's type), and whether there is one.
func ownKey(md eventstore.Metadata) (string, bool) {
	if len(md.Extra) == 0 {
		return "", false // most metadata has none: ranging over nil zeroes an iterator
	}
	for k := range md.Extra {
		if strings.HasPrefix(k, storekit.ReservedTypePrefix) {
			return k, true
		}
	}
	return "", false
}

// checkReserved refuses metadata keys that only Cairn sets: the
// repository appends as Cairn's own writer, which the store trusts with
// them, so a caller's key would pass for Cairn's (a forged trace context,
// a command type).
func checkReserved(stream string, md eventstore.Metadata) error {
	if k, ok := ownKey(md); ok {
		return &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "SaveOptions.Metadata.Extra",
			Reason: fmt.Sprintf("key %s starts with %q, which is reserved for the metadata Cairn sets itself", clip.Quote(k), storekit.ReservedTypePrefix)}
	}
	return nil
}

// Outcome is what a [Repository.Save] did.
type Outcome struct {
	// FirstVersion and LastVersion are the versions of the first and last
	// event saved.
	FirstVersion, LastVersion uint64
	// Events are the events as decoded from the store: the values that
	// replays apply, after upcasting.
	Events []any
	// Duplicate reports that the store already held these events: the
	// same command ID's decision was appended before, at the same place.
	Duplicate bool
	// Position is the global position of the last event: a projection
	// that has passed it shows the save's effect (see
	// projection.Consumer.WaitFor).
	Position eventstore.Position
}

// Save appends events to inst's stream, expecting inst's version, and on
// success applies them to inst, as decoded from what was appended, so that
// the state is the one a replay builds (the codec spares the decoding when
// it knows the decoded value is the one given: see
// [codec.Registry.RoundTrip]). Nothing is appended for no events.
// The command bus (package command) does this for every command, after
// looking for the command's earlier outcome; Save is for code that
// decides outside the bus, such as a migration or a test's set-up.
//
// When the store reports the append as a duplicate (the same command ID's
// events were appended first at that place: their IDs derive from the
// command ID), the stored events are what happened, and they may differ
// from the events given here when the decision reads the clock or makes up
// IDs. The Outcome is then read from the store, flagged Duplicate, and inst
// is brought up to date with the stream, never given the events passed
// in. When what the stream holds there is the command bus's recorded
// rejection of that command ID (command.Message.RecordRejection), nothing
// was saved, and the error is an [*eventstore.EventIDConflictError]. The
// command's events at another place are refused by the store, with the
// same error.
//
// Metadata.Extra keys starting with "cairn." are an
// [*eventstore.InvalidArgumentError]: Cairn sets them itself.
//
// The append is traced as an `append {aggregate type}` span (see
// docs/observability.md), the outermost of its trace unless ctx holds one,
// and the events record its context while it records.
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
	if inst != nil {
		if err := checkReserved(inst.Stream, opts.Metadata); err != nil {
			return Outcome{}, err
		}
	}
	out, err := r.save(ctx, inst, events, &busrepo.SaveOptions{CommandID: opts.CommandID, Metadata: opts.Metadata}, false)
	if err == nil && out.Rejection != nil {
		return Outcome{}, &eventstore.EventIDConflictError{Stream: inst.Stream, EventID: storekit.CommandEventID(inst.Stream, opts.CommandID, 0),
			StoredVersion: out.FirstVersion, Expected: storekit.StreamState(out.FirstVersion-1, out.FirstVersion > 0)}
	}
	return Outcome{FirstVersion: out.FirstVersion, LastVersion: out.LastVersion, Events: out.Events, Duplicate: out.Duplicate,
		Position: out.Position}, err
}

// save is [busrepo.Repo.Save]: Save, recording the command's type, and
// answering a duplicate with whatever outcome the stream holds, a recorded
// rejection included. A child save is a step of an operation traced by its
// caller (a dispatch): its append span is started only when the caller's
// span records, so that tracing that is off costs that caller's one span.
// Save itself is an operation of its own, always traced.
func (r *Repository[T, PT]) save(ctx context.Context, inst *Instance[T, PT], events []any, opts *busrepo.SaveOptions, child bool) (busrepo.Outcome, error) {
	if err := checkInstance(inst); err != nil {
		return busrepo.Outcome{}, err
	}
	if len(events) == 0 {
		return busrepo.Outcome{}, nil
	}
	for i, e := range events {
		if isNil(e) {
			return busrepo.Outcome{}, &eventstore.InvalidArgumentError{Stream: inst.Stream, Index: i, Field: "event",
				Reason: fmt.Sprintf("is nil (%d events to save): Handle must return event values", len(events))}
		}
	}
	if err := r.typ.checkEvents(inst.Stream, events); err != nil {
		return busrepo.Outcome{}, err
	}
	// What a replay applies is the stored event decoded: the value in hand
	// where the codec knows the two are equal (exact), else the decoding.
	var room [4]any
	exact := room[:0]
	if len(events) > len(room) {
		exact = make([]any, len(events))
	}
	exact = exact[:len(events)]
	data, err := r.reg.EncodeAllExact(events, exact)
	if err != nil {
		return busrepo.Outcome{}, err
	}
	actx, op := r.appends.Start(ctx, r.typ.name, inst.Stream, len(data), child)
	md := metadata(&op, opts)
	for i := range data {
		if opts.CommandID != "" {
			data[i].ID = storekit.CommandEventID(inst.Stream, opts.CommandID, i)
		}
		data[i].Metadata = md
		if i > 0 {
			data[i].Metadata = md.Clone()
		}
		telemetry.Fit(&data[i])
	}
	wctx := actx
	if _, own := ownKey(md); own {
		wctx = trusted.Writer(actx) // the store takes Cairn's keys from Cairn only
	}
	res, err := r.store.Append(wctx, inst.Stream, inst.expected(), data...)
	op.End(actx, res.FirstVersion, err)
	if err != nil {
		return busrepo.Outcome{}, err
	}
	if res.Duplicate {
		return r.storedOutcome(ctx, inst, opts.CommandID, res.FirstVersion)
	}
	out := busrepo.Outcome{FirstVersion: res.FirstVersion, LastVersion: res.LastVersion, Duplicate: res.Duplicate, Position: res.Position,
		Events: make([]any, 0, len(data)), CommandType: opts.CommandType}
	var buf []codec.Decoded
	for i := range data {
		version := res.FirstVersion + uint64(i)
		if v := exact[i]; v != nil {
			err = applyValue(inst, version, &data[i], v)
			out.Events = append(out.Events, v)
		} else {
			e := eventstore.Event{EventData: data[i], StreamID: inst.Stream, Version: version}
			if buf, err = r.apply(inst, &e, buf[:0], true); err == nil {
				for _, d := range buf {
					out.Events = append(out.Events, d.Value)
				}
			}
		}
		if err != nil {
			r.log.ErrorContext(ctx, "aggregate: stored events that the aggregate cannot apply",
				slog.String(telemetry.LogStream, inst.Stream), slog.Uint64(telemetry.LogVersion, version), slog.Any(telemetry.LogError, err))
			return out, err
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
func (r *Repository[T, PT]) storedOutcome(ctx context.Context, inst *Instance[T, PT], commandID string, first uint64) (busrepo.Outcome, error) {
	if _, err := r.replay(ctx, inst); err != nil {
		if err == errSnapshotPastEnd {
			err = fmt.Errorf("%w: stream %q no longer has version %d, which the instance was built to", eventstore.ErrCorrupt, inst.Stream, inst.Version)
		}
		return busrepo.Outcome{}, err
	}
	out, found, err := r.readOutcome(ctx, inst.Stream, commandID, span{first: first, last: eventstore.End})
	if err == nil && !found {
		err = fmt.Errorf("%w: stream %q: the store reports the events of command %q as stored from version %d, but they are not there",
			eventstore.ErrCorrupt, inst.Stream, commandID, first)
	}
	return out, err
}
