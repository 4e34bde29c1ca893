package saga

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/sagareplay"
)

// sagatest.CheckHistory replays histories through internal/sagareplay.
func init() {
	sagareplay.Register(func(ctx context.Context, sagaType any, history iter.Seq2[eventstore.Event, error]) ([]sagareplay.Divergence, error) {
		t, ok := sagaType.(interface {
			replay(context.Context, iter.Seq2[eventstore.Event, error]) ([]sagareplay.Divergence, error)
		})
		if !ok {
			return nil, fmt.Errorf("%w: %T is no saga type", eventstore.ErrInvalidArgument, sagaType)
		}
		return t.replay(ctx, history)
	})
}

// replay runs a recorded history of one instance through the current code
// of saga type t, and reports every step where it decides differently:
// other commands, other deadlines, another completion, or no decision at
// all (the old state or message no longer decodes, the handler fails).
// Each step is decided from the state the history recorded before it,
// with the message it recorded, at the time it ran; so a model change is
// checked against real instances before it meets them in production. It
// stores nothing.
//
// The history is what [Runner.Export] yields: the instance's step records,
// oldest first, each after the stored events it refers to (records keep
// stored events by reference). A step whose event the history does not
// hold is reported as one the current code cannot decide.
func (t *Type[S]) replay(ctx context.Context, history iter.Seq2[eventstore.Event, error]) ([]sagareplay.Divergence, error) {
	if err := t.reg.Validate(); err != nil {
		return nil, &SetupError{Saga: t.name, Reason: "its codec registry is not set up right", Err: err}
	}
	var out []sagareplay.Divergence
	in := &instance[S]{}
	// Records refer to the stored events they took in, and to the records
	// that sent the commands rejected: the history carries both.
	events := make(map[string]eventstore.Event)
	at := func(stream string, version uint64) string { return stream + "\x00" + uitoa(version) }
	lookup := func(_ context.Context, stream string, version uint64) (eventstore.Event, bool, error) {
		ev, ok := events[at(stream, version)]
		return ev, ok, nil
	}
	for ev, err := range history {
		if err != nil {
			if in.stream != "" {
				return out, fmt.Errorf("saga %q, instance %q (stream %q): the history after step %d: %w", t.name, in.id, in.stream, in.version, err)
			}
			return out, fmt.Errorf("saga %q: the history before its first step: %w", t.name, err)
		}
		events[at(ev.StreamID, ev.Version)] = ev
		if ev.Type != recordType || (in.stream != "" && ev.StreamID != in.stream) {
			continue // an event that a record refers to
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return out, fmt.Errorf("saga %q: %w", t.name, err)
		}
		if in.stream == "" {
			id, ok := strings.CutPrefix(ev.StreamID, t.Category())
			if !ok || id == "" {
				return out, &eventstore.InvalidArgumentError{Stream: ev.StreamID, Index: -1, Field: "history",
					Reason: fmt.Sprintf("step record #%d is not in a stream of saga %q (%s<instance>)", ev.Version, t.name, t.Category())}
			}
			in.stream, in.id = ev.StreamID, id
		}
		if msg := replayed(&in.rec, rec); msg != nil {
			if d, diverges := replayStep(ctx, t, in, msg, ev.Version, rec, lookup); diverges {
				out = append(out, d)
			}
		}
		in.exists, in.version, in.rec = true, ev.Version, *rec
	}
	return out, nil
}

// Export yields the history of instance id as sagatest.CheckHistory
// takes it: the instance's step records, oldest
// first, each after the stored event it handled, which the record keeps by
// reference. The history stands alone: write it to a file with
// sagatest.WriteHistory, and check a model change against it in CI.
func (r *Runner[S]) Export(ctx context.Context, id string) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		for ev, err := range r.e.store.ReadStream(ctx, r.e.t.Stream(id), eventstore.Forward(0)) {
			if err != nil {
				yield(eventstore.Event{}, err)
				return
			}
			rec, err := decodeRecord(ev)
			if err != nil {
				yield(eventstore.Event{}, err)
				return
			}
			if m := rec.Handled.Message; m.Ordered && m.Event == nil && replayed(&record{}, rec) != nil {
				src, found, err := r.e.storedEvent(ctx, m.Source, m.Sequence)
				if err != nil {
					yield(eventstore.Event{}, err)
					return
				}
				if found && !yield(src, nil) {
					return
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// replayed rebuilds the message a recorded step handled, or nil for a step
// that decided nothing (held, parked, skipped, released) or whose message
// its record could not keep.
func replayed(prev *record, rec *record) *message {
	c := rec.Handled
	m := c.Message
	msg := &message{in: m}
	switch c.Kind {
	case kindDeadline:
	case kindEvent:
		if !m.Ordered && m.Event == nil {
			return nil // a delivery too large to keep beside the step
		}
		if p := prev.Sources[m.Source]; m.Ordered && p.Pending {
			// Taken from its pending stream by a drain: the last one when the
			// step ended the waiting.
			msg.pending, msg.last = true, !rec.Sources[m.Source].Pending
		}
	case kindRejected:
	default:
		return nil
	}
	key := msg.key()
	msg.fromHeld = slices.ContainsFunc(prev.Held, func(h envelope) bool { return h.key() == key })
	msg.unpark = prev.Parked != nil && prev.Parked.Message.key() == key
	return msg
}

// replayStep decides msg from the state before a recorded step, and
// compares it with what the step recorded.
func replayStep[S any](ctx context.Context, t *Type[S], before *instance[S], msg *message, version uint64, rec *record,
	events func(ctx context.Context, stream string, version uint64) (eventstore.Event, bool, error)) (sagareplay.Divergence, bool) {
	e := &engine[S]{t: t, now: func() time.Time { return rec.Handled.At }, events: events}
	st := stepOf(version, rec)
	d := sagareplay.Divergence{Instance: before.id, Stream: before.stream, Step: sagareplay.Step{Version: st.Version, Kind: st.Kind,
		Type: st.Type, Source: st.Source, Sequence: st.Sequence, Deadline: st.Deadline}}
	var err error
	if d.Recorded, err = e.decision(rec); err != nil {
		d.Err = fmt.Errorf("the recorded step: %w", err)
		return d, true
	}
	now, out, herr, err := e.decide(ctx, before, msg, nil)
	switch {
	case herr != nil:
		d.Err = herr
		return d, true
	case err != nil:
		d.Err = err
		return d, true
	case now == nil || out != handled:
		d.Err = fmt.Errorf("the current code does not handle the message: it is %s", Outcome(out))
		return d, true
	}
	if d.Now, err = e.decision(now); err != nil {
		d.Err = err
		return d, true
	}
	return d, !reflect.DeepEqual(d.Recorded, d.Now)
}

// decision decodes what a record decided, with the current code's types.
func (e *engine[S]) decision(rec *record) (sagareplay.Decision, error) {
	var d sagareplay.Decision
	for _, c := range rec.Commands {
		v, err := e.t.reg.DecodeValue(c.Command.upcast())
		if err != nil {
			return d, err
		}
		d.Commands = append(d.Commands, v)
	}
	for _, dl := range rec.Deadlines {
		p, err := e.t.reg.DecodeValue(dl.Payload.upcast())
		if err != nil {
			return d, err
		}
		d.Deadlines = append(d.Deadlines, sagareplay.Deadline{Name: dl.Name, At: dl.At, Payload: p})
	}
	slices.SortFunc(d.Deadlines, func(a, b sagareplay.Deadline) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	d.Completed = rec.Completed
	return d, nil
}
