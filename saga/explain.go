package saga

import (
	"context"
	"iter"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Explanation is an instance as its latest step left it: what an operator
// needs to answer "why is instance X stuck?".
type Explanation[S any] struct {
	// Instance is the instance ID and Stream its stream.
	Instance, Stream string
	// Exists is false for an instance that has no step yet.
	Exists bool
	// Version is the version of the latest step.
	Version uint64
	// Started and Completed say whether an event started the instance and
	// whether a handler completed it.
	Started, Completed bool
	// State is the instance's state (upcast to the current code).
	State *S
	// Watermarks are the last sequence handled per source.
	Watermarks map[string]uint64
	// Held are the messages waiting, oldest first: Gap says which
	// sequence of their source they wait for (when they wait for a gap
	// rather than behind a parked message).
	Held []HeldMessage
	// Parked is the message the instance failed on, if any.
	Parked *ParkedMessage
	// Deadlines are the pending deadlines, soonest first.
	Deadlines []Deadline
	// Unsent are the commands that steps recorded and the outbox has not
	// yet confirmed sent (it has not moved its checkpoint past their
	// steps), oldest first, less those whose rejection was fed back
	// already. They go out when the outbox runs; nil when the runner has no
	// checkpoint store to ask.
	Unsent []SentCommand
	// LastStep is the latest step.
	LastStep Step
}

// HeldMessage is a message an instance keeps until it can handle it.
type HeldMessage struct {
	Source   string
	Sequence uint64
	Type     string
	EventID  uuid.UUID
	// WaitsFor is the sequence of Source the instance needs first; equal to
	// Sequence when the message waits only behind a parked one.
	WaitsFor uint64
	Since    time.Time
}

// ParkedMessage is the message an instance failed on.
type ParkedMessage struct {
	// Kind is "event", "deadline" or "rejected".
	Kind     string
	Source   string
	Sequence uint64
	Type     string
	// Deadline is the ID of a parked deadline.
	Deadline string
	Error    string
	Attempts int
	Since    time.Time
}

// Deadline is a pending deadline.
type Deadline struct {
	ID, Name string
	At       time.Time
}

// Step is one record of an instance's history.
type Step struct {
	Version uint64
	// Kind is what the step did: "event", "deadline", "rejected" (a
	// handler ran), "held", "parked", "skipped", "released" or "redriven"
	// (see [Runner.Redrive]).
	Kind     string
	Source   string
	Sequence uint64
	Type     string
	EventID  uuid.UUID
	Position eventstore.Position
	Deadline string
	Command  string
	At       time.Time
	// Commands are the commands the step sent, with their IDs.
	Commands []SentCommand
	// Completed says the step completed the instance.
	Completed bool
	// Recorded is the position of the step's own record in the store (zero
	// in [Explanation.LastStep]).
	Recorded eventstore.Position
}

// SentCommand is a command a step sent.
type SentCommand struct {
	ID string
	// Type is the command's codec type name.
	Type    string
	Command any
}

// Explain returns instance id as its latest step left it.
func (r *Runner[S]) Explain(ctx context.Context, id string) (Explanation[S], error) {
	in, err := r.e.read(ctx, id)
	if err != nil {
		return Explanation[S]{}, err
	}
	x := Explanation[S]{Instance: id, Stream: in.stream, Exists: in.exists, Version: in.version,
		Started: in.rec.State.Type != "", Completed: in.rec.Completed, Watermarks: in.rec.Marks}
	if !in.exists {
		return x, nil
	}
	if x.State, err = r.e.state(in); err != nil {
		return x, err
	}
	for _, h := range in.rec.Held {
		wait, _ := waitsFor(&in.rec, h)
		x.Held = append(x.Held, HeldMessage{Source: h.Source, Sequence: h.Sequence, Type: h.Event.Type, EventID: h.EventID, WaitsFor: wait, Since: h.Since})
	}
	if p := in.rec.Parked; p != nil {
		kind := p.Message.Kind
		switch {
		case p.Deadline != "":
			kind = kindDeadline
		case kind == "":
			kind = kindEvent
		}
		x.Parked = &ParkedMessage{Kind: kind, Source: p.Message.Source, Sequence: p.Message.Sequence, Type: p.Message.Event.Type,
			Deadline: p.Deadline, Error: p.Error, Attempts: p.Attempts, Since: p.Since}
	}
	for _, d := range in.rec.Deadlines {
		x.Deadlines = append(x.Deadlines, Deadline{ID: d.ID, Name: d.Name, At: d.At})
	}
	sort.Slice(x.Deadlines, func(i, j int) bool { return x.Deadlines[i].At.Before(x.Deadlines[j].At) })
	if x.LastStep, err = r.step(in.version, &in.rec); err != nil {
		return x, err
	}
	x.Unsent, err = r.unsent(ctx, in)
	return x, err
}

// unsent returns the commands of the steps of instance in that the outbox
// has not passed, oldest first, reading the instance's history backward
// only as far as the outbox's checkpoint.
func (r *Runner[S]) unsent(ctx context.Context, in *instance[S]) ([]SentCommand, error) {
	checkpoints := r.checkpoints()
	if checkpoints == nil {
		return nil, nil
	}
	_, outbox := r.segmentNames(Segment(in.id, r.segments))
	cp, err := checkpoints.Checkpoint(ctx, outbox)
	if err != nil {
		return nil, err
	}
	rejectedThrough := in.rec.Marks[rejectionSource]
	var out []SentCommand
	for ev, err := range r.e.store.ReadStream(ctx, in.stream, eventstore.ReadOptions{From: eventstore.End, Backward: true}) {
		if err != nil {
			return nil, err
		}
		if !cp.Position.Before(ev.Position) {
			break
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return nil, err
		}
		s, err := r.step(ev.Version, rec)
		if err != nil {
			return nil, err
		}
		for i := len(s.Commands) - 1; i >= 0; i-- {
			if rejectionSeq(ev.Version, i) > rejectedThrough {
				out = append(out, s.Commands[i])
			}
		}
	}
	slices.Reverse(out)
	return out, nil
}

// History yields every step of instance id, oldest first.
func (r *Runner[S]) History(ctx context.Context, id string) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		for ev, err := range r.e.store.ReadStream(ctx, r.e.t.Stream(id), eventstore.Forward(0)) {
			if err != nil {
				yield(Step{}, err)
				return
			}
			rec, err := decodeRecord(ev)
			if err != nil {
				yield(Step{}, err)
				return
			}
			s, err := r.step(ev.Version, rec)
			s.Recorded = ev.Position
			if !yield(s, err) || err != nil {
				return
			}
		}
	}
}

// step describes a record, decoding the commands it sent.
func (r *Runner[S]) step(version uint64, rec *record) (Step, error) {
	h := rec.Handled
	s := Step{Version: version, Kind: h.Kind, Source: h.Source, Sequence: h.Sequence, Type: h.Type, EventID: h.EventID,
		Position: h.Position, Deadline: h.Deadline, Command: h.Command, At: h.At, Completed: rec.Completed}
	for _, c := range rec.Commands {
		v, err := r.e.t.reg.DecodeValue(c.Command.upcast())
		if err != nil {
			return s, err
		}
		s.Commands = append(s.Commands, SentCommand{ID: c.ID, Type: c.Command.Type, Command: v})
	}
	return s, nil
}
