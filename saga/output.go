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
	now       time.Time
	commands  []command.Command
	schedules []schedule
	cancels   []string
	complete  bool
}

type schedule struct {
	name    string
	at      time.Time
	payload any
}

// Now returns the time of the step, from the runner's clock: use it rather
// than time.Now, so that tests can move time.
func (o *Output) Now() time.Time { return o.now }

// Send records a command to send. Its type must be declared with [Sends].
// The outbox dispatches it after the step is stored, with a command ID
// derived from the instance, the message handled and the command's index,
// so that a re-send after a crash is absorbed by the bus.
func (o *Output) Send(cmd command.Command) { o.commands = append(o.commands, cmd) }

// ScheduleAt sets the deadline called name to fire at at, with payload (a
// value registered with the codec, whose type the deadline's handler
// takes). Setting a name that is pending reschedules it: the earlier one
// never fires.
func (o *Output) ScheduleAt(name string, at time.Time, payload any) {
	o.schedules = append(o.schedules, schedule{name: name, at: at.UTC(), payload: payload})
}

// ScheduleAfter sets the deadline called name to fire d after the step's
// time (see [Output.Now]).
func (o *Output) ScheduleAfter(name string, d time.Duration, payload any) {
	o.ScheduleAt(name, o.now.Add(d), payload)
}

// Cancel cancels the pending deadline called name, if any: it never
// reaches its handler, even if it was due.
func (o *Output) Cancel(name string) { o.cancels = append(o.cancels, name) }

// Complete ends the instance: later messages for it are ignored (and
// counted), and its pending deadlines are dropped.
func (o *Output) Complete() { o.complete = true }
