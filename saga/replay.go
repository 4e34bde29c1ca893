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
)

// Decision is what one step decided, in the terms a model change can
// alter: the commands it sent, the deadlines pending after it, and whether
// it completed the instance.
type Decision struct {
	Commands  []any
	Deadlines []ScheduledDeadline
	Completed bool
}

// ScheduledDeadline is a pending deadline as a step left it.
type ScheduledDeadline struct {
	Name    string
	At      time.Time
	Payload any
}

// Divergence is a step of a recorded history that the current code decides
// otherwise, or cannot decide at all.
type Divergence struct {
	// Step is the recorded step.
	Step Step
	// Recorded is what the step decided when it ran; Now is what the
	// current code decides from the same state and message.
	Recorded, Now Decision
	// Err is set when the current code cannot decide: the recorded state or
	// message does not decode any more, or the handler fails.
	Err error
}

// String describes the divergence for a test failure.
func (d Divergence) String() string {
	what := fmt.Sprintf("step %d (%s", d.Step.Version, d.Step.Kind)
	if d.Step.Type != "" {
		what += " " + d.Step.Type
	}
	if d.Step.Source != "" {
		what += fmt.Sprintf(" #%d of %q", d.Step.Sequence, d.Step.Source)
	}
	if d.Step.Deadline != "" {
		what += " " + d.Step.Deadline
	}
	what += ")"
	if d.Err != nil {
		return what + ": the current code cannot decide it: " + d.Err.Error()
	}
	return fmt.Sprintf("%s:\n  recorded: %+v\n  now:      %+v", what, d.Recorded, d.Now)
}

// Replay runs a recorded history of one instance (its step records, oldest
// first, as an instance stream holds them: from a store, or exported to a
// file) through the current code of saga type t, and reports every step
// where it decides differently: other commands, other deadlines, another
// completion, or no decision at all (the old state or message no longer
// decodes, the handler fails). Each step is decided from the state the
// history recorded before it, with the message it recorded, at the time it
// ran; so a model change is checked against real instances before it meets
// them in production. It stores nothing.
func Replay[S any](ctx context.Context, t *Type[S], history iter.Seq2[eventstore.Event, error]) ([]Divergence, error) {
	if err := t.reg.Validate(); err != nil {
		return nil, &SetupError{Saga: t.name, Reason: "its codec registry is not set up right", Err: err}
	}
	var out []Divergence
	in := &instance[S]{}
	for ev, err := range history {
		if err != nil {
			return out, err
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return out, err
		}
		if in.stream == "" {
			in.stream = ev.StreamID
			in.id = ev.StreamID[min(len(t.Category()), len(ev.StreamID)):]
		}
		if msg := replayed(&in.rec, rec.Handled); msg != nil {
			if d, diverges := replayStep(ctx, t, in, msg, ev.Version, rec); diverges {
				out = append(out, d)
			}
		}
		in.exists, in.version, in.rec = true, ev.Version, *rec
	}
	return out, nil
}

// replayed rebuilds the message a recorded step handled, or nil for a step
// that decided nothing (held, parked, skipped, released).
func replayed(prev *record, c cause) *message {
	msg := &message{kind: c.Kind, deadline: c.Deadline}
	switch c.Kind {
	case kindDeadline:
	case kindEvent, kindRejected:
		if c.Event == nil {
			return nil // recorded before steps kept their message
		}
		msg.in = heldMessage{Source: c.Source, Sequence: c.Sequence, Ordered: true, EventID: c.EventID, Position: c.Position,
			Event: *c.Event, Metadata: c.Metadata, Command: c.Command, Reason: c.Reason}
		if c.Kind == kindRejected {
			msg.in.Kind = kindRejected
		}
		msg.fromHeld = slices.ContainsFunc(prev.Held, func(h heldMessage) bool { return h.Source == c.Source && h.Sequence == c.Sequence })
	default:
		return nil
	}
	if p := prev.Parked; p != nil && p.Deadline == c.Deadline && p.Message.Source == c.Source && p.Message.Sequence == c.Sequence {
		msg.unpark = true
	}
	return msg
}

// replayStep decides msg from the state before a recorded step, and
// compares it with what the step recorded.
func replayStep[S any](ctx context.Context, t *Type[S], before *instance[S], msg *message, version uint64, rec *record) (Divergence, bool) {
	e := &engine[S]{t: t, now: func() time.Time { return rec.Handled.At }}
	d := Divergence{Step: Step{Version: version, Kind: rec.Handled.Kind, Source: rec.Handled.Source, Sequence: rec.Handled.Sequence,
		Type: rec.Handled.Type, EventID: rec.Handled.EventID, Position: rec.Handled.Position, Deadline: rec.Handled.Deadline,
		Command: rec.Handled.Command, At: rec.Handled.At, Completed: rec.Completed}}
	var err error
	if d.Recorded, err = e.decision(rec); err != nil {
		d.Err = fmt.Errorf("the recorded step: %w", err)
		return d, true
	}
	now, out, err := e.decide(ctx, before, msg, nil)
	switch {
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
func (e *engine[S]) decision(rec *record) (Decision, error) {
	var d Decision
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
		d.Deadlines = append(d.Deadlines, ScheduledDeadline{Name: dl.Name, At: dl.At, Payload: p})
	}
	slices.SortFunc(d.Deadlines, func(a, b ScheduledDeadline) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	d.Completed = rec.Completed
	return d, nil
}
