package saga

import (
	"time"

	"github.com/cairn-es/cairn/command"
)

// Output is what a handler decides, besides changing the state: commands to
// send, deadlines to set or cancel, and whether the instance is complete.
// It is recorded in the step's one append, so all of it happens, exactly
// once, or none of it.
type Output struct {
	now      time.Time
	commands []command.Command
	// timing holds the deadline operations in the order they were called,
	// which is the order they apply in.
	timing   []timing
	complete bool
}

// timing is one deadline operation: a schedule, or a cancel.
type timing struct {
	cancel  bool
	name    string
	at      time.Time
	payload any
}

// Now returns the time of the step, from the runner's clock: use it rather
// than time.Now, so that tests can move time.
func (o *Output) Now() time.Time { return o.now }

// Send records a command to send. Its type must be declared with [Sends].
// The outbox dispatches it after the step is stored, with a command ID
// derived from the instance, the message handled, the command's type and
// target aggregate, and its ordinal among the step's commands of that type
// and target (not from its payload): a re-send after a crash, or the same
// command decided again by [Runner.Redrive], is absorbed by the bus.
func (o *Output) Send(cmd command.Command) { o.commands = append(o.commands, cmd) }

// ScheduleAt sets the deadline called name to fire at at, with payload (a
// value registered with the codec, whose type the deadline's handler
// takes). Setting a name that is pending reschedules it: the earlier one
// never fires. A zero time, or one outside the years 1970 to 9999, fails
// the step as a handler error would.
func (o *Output) ScheduleAt(name string, at time.Time, payload any) {
	o.timing = append(o.timing, timing{name: name, at: at.UTC(), payload: payload})
}

// ScheduleAfter sets the deadline called name to fire d after the step's
// time (see [Output.Now]).
func (o *Output) ScheduleAfter(name string, d time.Duration, payload any) {
	o.ScheduleAt(name, o.now.Add(d), payload)
}

// Cancel cancels the deadline called name, if it is pending, or scheduled
// earlier in this step: it never reaches its handler, even if it was due.
// Deadline operations apply in the order they are called, so a schedule
// after a cancel of the same name sets it again.
func (o *Output) Cancel(name string) { o.timing = append(o.timing, timing{cancel: true, name: name}) }

// Complete ends the instance: later events for it are ignored (and
// counted), and its pending deadlines are dropped. The rejections of the
// commands that this step sends still reach it (its [OnRejected] handlers
// run), so that a step that sends a command and completes can still
// compensate when that command is rejected; those of commands sent by
// earlier steps, still in flight, are ignored: the instance ended without
// waiting for them.
func (o *Output) Complete() { o.complete = true }
