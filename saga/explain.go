package saga

import (
	"context"
	"errors"
	"fmt"
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
	// Watermarks are, per source, the last sequence up to which every
	// message was taken (handled, or passed over); a source with nothing
	// taken in order has none.
	Watermarks map[string]uint64
	// OutOfOrder are, per source, the sequences above its watermark
	// handled out of order (events mapped with AnyOrder), ascending.
	OutOfOrder map[string][]uint64
	// Pending are the sources whose stored events wait behind a parked
	// message, with the version of the stream from which they are read
	// again when the instance goes on.
	Pending map[string]uint64
	// Held are the deliveries and rejections waiting, oldest first:
	// WaitsFor says which sequence of their source they wait for (when they
	// wait for a gap rather than behind a parked message).
	Held []HeldMessage
	// Parked is the message the instance failed on, if any.
	Parked *ParkedMessage
	// Deadlines are the pending deadlines, soonest first.
	Deadlines []Deadline
	// Unsent are the commands that steps recorded and the outbox has not
	// yet confirmed sent (it has not moved its checkpoint past their
	// steps), oldest first, less those whose outcome the instance took
	// already. They go out when the outbox runs; nil when the runner has no
	// checkpoint store to ask.
	Unsent []SentCommand
	// LastStep is the latest step.
	LastStep Step
	// Redrive is the latest [Runner.Redrive] of the instance, with how the
	// commands its re-run sent so far compare with the first run's; nil
	// when it was never re-driven.
	Redrive *Redriven
}

// HeldMessage is a message an instance keeps until it can handle it.
type HeldMessage struct {
	// ID names the message among the instance's (see [ParkedMessage.ID]).
	ID string
	// Kind is "event" (a delivery), "rejected" (a rejection held behind a
	// parked message) or "command" (a command's failure, held likewise).
	Kind     string
	Source   string
	Sequence uint64
	Type     string
	EventID  uuid.UUID
	// Command is a held rejection's command ID.
	Command string
	// WaitsFor is the sequence of Source the instance needs first; equal to
	// Sequence when the message waits only behind a parked one.
	WaitsFor uint64
	Since    time.Time
}

// ParkedMessage is the message an instance failed on.
type ParkedMessage struct {
	// ID names the message among the instance's: pass it to
	// [Runner.Retry] or [Runner.Skip], which act only while that message
	// is the one parked.
	ID string
	// Kind is "event", "deadline", "rejected" (the rejection's handler
	// failed) or "command" (the bus kept failing the command without a
	// rejection).
	Kind     string
	Source   string
	Sequence uint64
	Type     string
	// Deadline is the ID of a parked deadline; Command the ID of a parked
	// rejection's or failure's command.
	Deadline string
	Command  string
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
	// handler ran), "held", "parked", "skipped", "released", "retried" (an
	// operator re-sent a parked command) or "redriven" (see
	// [Runner.Redrive]).
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

// stepOf describes a record, without its commands.
func stepOf(version uint64, rec *record) Step {
	h := rec.Handled
	m := h.Message
	return Step{Version: version, Kind: h.Kind, Source: m.Source, Sequence: m.Sequence, Type: m.Type, EventID: m.EventID,
		Position: m.Position, Deadline: m.Deadline, Command: m.Command, At: h.At, Completed: rec.Completed}
}

// SentCommand is a command a step sent.
type SentCommand struct {
	ID string
	// Type is the command's codec type name.
	Type string
	// Command is the command's value: nil when this code cannot decode
	// it (its type changed without its upcaster deployed).
	Command any
}

// Explain returns instance id as its latest step left it. When this code
// cannot read part of it (a state or command type changed without its
// upcaster deployed), Explain still fills in everything else, parked and
// held messages included, and returns an error naming what it could not
// read: State is nil then, or LastStep and Unsent lack the commands.
func (r *Runner[S]) Explain(ctx context.Context, id string) (Explanation[S], error) {
	in, err := r.e.read(ctx, id)
	if err != nil {
		return Explanation[S]{}, err
	}
	x := Explanation[S]{Instance: id, Stream: in.stream, Exists: in.exists, Version: in.version,
		Started: in.rec.State.Type != "", Completed: in.rec.Completed}
	if !in.exists {
		return x, nil
	}
	var unreadable []error
	if x.State, err = r.e.state(in); err != nil {
		unreadable = append(unreadable, err)
	}
	x.Watermarks, x.OutOfOrder, x.Pending = progressOf(&in.rec)
	for _, h := range in.rec.Held {
		wait, _ := heldWait(&in.rec, h, r.e.anyOrder)
		x.Held = append(x.Held, HeldMessage{ID: h.key(), Kind: h.kind(), Source: h.Source, Sequence: h.Sequence, Type: h.Type,
			EventID: h.EventID, Command: h.Command, WaitsFor: wait, Since: h.Since})
	}
	if p := in.rec.Parked; p != nil {
		m := parkedMessageOf(p)
		x.Parked = &m
	}
	for _, d := range in.rec.Deadlines {
		x.Deadlines = append(x.Deadlines, Deadline{ID: d.ID, Name: d.Name, At: d.At})
	}
	sort.Slice(x.Deadlines, func(i, j int) bool { return x.Deadlines[i].At.Before(x.Deadlines[j].At) })
	if x.LastStep, err = r.step(in.stream, in.version, &in.rec); err != nil {
		unreadable = append(unreadable, err)
	}
	if x.Unsent, err = r.unsent(ctx, in); err != nil {
		unreadable = append(unreadable, err)
	}
	if mark := in.rec.Redrive; mark != nil {
		report, err := r.redriveReport(ctx, in.stream, in.version, *mark)
		if err != nil {
			unreadable = append(unreadable, err)
		}
		x.Redrive = &report
	}
	return x, errors.Join(unreadable...)
}

// parkedMessageOf is p as [Explanation] and [Runner.Parked] show it.
func parkedMessageOf(p *parkedMessage) ParkedMessage {
	m := p.Message
	return ParkedMessage{ID: m.key(), Kind: m.kind(), Source: m.Source, Sequence: m.Sequence, Type: m.Type,
		Deadline: m.Deadline, Command: m.Command, Error: p.Error, Attempts: p.Attempts, Since: p.Since}
}

// progressOf returns the watermarks, out-of-order sequences and pending
// sources of rec, as [Explanation] shows them.
func progressOf(rec *record) (marks map[string]uint64, above map[string][]uint64, pending map[string]uint64) {
	for src, p := range rec.Sources {
		if p.Next > 0 {
			if marks == nil {
				marks = make(map[string]uint64)
			}
			marks[src] = p.Next - 1
		}
		if len(p.Above) > 0 {
			if above == nil {
				above = make(map[string][]uint64)
			}
			above[src] = slices.Clone(p.Above)
		}
		if p.Pending {
			if pending == nil {
				pending = make(map[string]uint64)
			}
			pending[src] = p.Next
		}
	}
	return marks, above, pending
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
	var out []SentCommand
	var unreadable []error
	isSettled := r.e.settledCheck(ctx, in)
	for ev, err := range r.e.store.ReadStream(ctx, in.stream, eventstore.ReadOptions{From: eventstore.End, Backward: true}) {
		if err != nil {
			return nil, err
		}
		if !cp.Position.Before(ev.Position) {
			break
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			return nil, err
		}
		s, err := r.step(in.stream, ev.Version, rec)
		if err != nil {
			unreadable = append(unreadable, err) // listed without their values
		}
		for i := len(s.Commands) - 1; i >= 0; i-- {
			done, err := isSettled(s.Commands[i].ID, ev.Version)
			if err != nil {
				return nil, err
			}
			if !done {
				out = append(out, s.Commands[i])
			}
		}
	}
	slices.Reverse(out)
	return out, errors.Join(unreadable...)
}

// History yields every step of instance id, oldest first. A record this
// code cannot read (damaged, or foreign to the saga) or one with commands
// it cannot decode is yielded with an error naming it, and the history
// goes on; a store's error ends it.
func (r *Runner[S]) History(ctx context.Context, id string) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		stream := r.e.t.Stream(id)
		for ev, err := range r.e.store.ReadStream(ctx, stream, eventstore.Forward(0)) {
			if err != nil {
				yield(Step{}, err)
				return
			}
			rec, err := decodeOutline(ev)
			if err != nil {
				if !yield(Step{Version: ev.Version, Recorded: ev.Position}, err) {
					return
				}
				continue
			}
			s, err := r.step(stream, ev.Version, rec)
			s.Recorded = ev.Position
			if !yield(s, err) {
				return
			}
		}
	}
}

// step describes record version of stream, decoding the commands it sent:
// one that this code cannot decode is listed without its value, and named
// in the error.
func (r *Runner[S]) step(stream string, version uint64, rec *record) (Step, error) {
	s := stepOf(version, rec)
	var unreadable []error
	for _, c := range rec.Commands {
		sent, err := r.sentCommandOf(stream, version, c)
		if err != nil {
			unreadable = append(unreadable, err)
		}
		s.Commands = append(s.Commands, sent)
	}
	return s, errors.Join(unreadable...)
}

// sentCommandOf is command c of the step record at version of stream as
// operators see it, with an error naming it when this code cannot decode
// it (its Command is nil then).
func (r *Runner[S]) sentCommandOf(stream string, version uint64, c sentCommand) (SentCommand, error) {
	v, err := r.e.t.reg.DecodeValue(c.Command.upcast())
	if err != nil {
		err = fmt.Errorf("saga stream %q, version %d, command %s: %w", stream, version, c.ID, err)
	}
	return SentCommand{ID: c.ID, Type: c.Command.Type, Command: v}, err
}
