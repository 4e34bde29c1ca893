// Package sagareplay runs a recorded history of one saga instance through
// the current code of its saga type and reports the steps it decides
// otherwise. It is the engine of sagatest.CheckHistory, which is how users
// reach it; the replay itself needs the saga package's records, so package
// saga registers it here when it is initialised.
package sagareplay

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// Decision is what one step decided, in the terms a model change can
// alter: the commands it sent, the deadlines pending after it, and whether
// it completed the instance.
type Decision struct {
	Commands  []any
	Deadlines []Deadline
	Completed bool
}

// Deadline is a pending deadline as a step left it.
type Deadline struct {
	Name    string
	At      time.Time
	Payload any
}

// Step names the recorded step of a divergence.
type Step struct {
	Version  uint64
	Kind     string
	Type     string
	Source   string
	Sequence uint64
	Deadline string
}

// Divergence is a step of a recorded history that the current code decides
// otherwise, or cannot decide at all.
type Divergence struct {
	// Instance is the instance whose history holds the step, and Stream
	// its stream.
	Instance, Stream string
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
	what := fmt.Sprintf("instance %q (stream %q), step %d (%s", d.Instance, d.Stream, d.Step.Version, d.Step.Kind)
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
	return fmt.Sprintf("%s:\n  recorded: %s\n  now:      %s", what, d.Recorded, d.Now)
}

// String describes the decision with the Go types of its values, so that
// a divergence shows which command or payload differs.
func (d Decision) String() string {
	cmds := make([]string, len(d.Commands))
	for i, c := range d.Commands {
		cmds[i] = fmt.Sprintf("%#v", c)
	}
	dls := make([]string, len(d.Deadlines))
	for i, dl := range d.Deadlines {
		dls[i] = fmt.Sprintf("%s at %s: %#v", dl.Name, dl.At.Format(time.RFC3339Nano), dl.Payload)
	}
	return fmt.Sprintf("commands [%s], deadlines [%s], completed %t", strings.Join(cmds, ", "), strings.Join(dls, ", "), d.Completed)
}

// replay is saga's replay of a history through a *saga.Type[S].
var replay func(ctx context.Context, sagaType any, history iter.Seq2[eventstore.Event, error]) ([]Divergence, error)

// Register is called by package saga with its replay.
func Register(f func(ctx context.Context, sagaType any, history iter.Seq2[eventstore.Event, error]) ([]Divergence, error)) {
	replay = f
}

// Replay runs a recorded history of one instance through the current code
// of sagaType (a *saga.Type[S]), and reports every step where it decides
// differently: other commands, other deadlines, another completion, or no
// decision at all (the old state or message no longer decodes, the
// handler fails). Each step is decided from the state the history recorded
// before it, with the message it recorded, at the time it ran. It stores
// nothing.
//
// The history is what saga.Runner.Export yields: the instance's step
// records, oldest first, each after the stored events it refers to. A
// step whose event the history does not hold is reported as one the
// current code cannot decide.
func Replay(ctx context.Context, sagaType any, history iter.Seq2[eventstore.Event, error]) ([]Divergence, error) {
	return replay(ctx, sagaType, history)
}
