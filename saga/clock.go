package saga

import (
	"time"
)

// Clock tells a runner the time. Tests pass a clock they move (see
// sagatest.Clock); nil means the system clock. Only Run waits on it, to
// wake when a deadline falls due: a clock that is also a [Waker] wakes it
// exactly then; one that is not (a Now alone, enough for Deliver, FireDue
// and CatchUp) is looked at again every [PollInterval] while Run runs.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// Waker is a [Clock] that can wake Run when a time on it has come.
type Waker interface {
	// After returns a channel that receives once d has passed on this
	// clock.
	After(d time.Duration) <-chan time.Time
}

// PollInterval is how often Run looks at a [Clock] that is not a [Waker]
// again, by the wall clock.
const PollInterval = time.Second

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// after returns a channel that receives once d has passed on the engine's
// clock, or, for a clock that is not a Waker, after at most PollInterval
// of wall time: the caller looks at the clock again then.
func (e *engine[S]) after(d time.Duration) <-chan time.Time {
	if w, ok := e.clock.(Waker); ok {
		return w.After(d)
	}
	return time.After(min(d, PollInterval))
}
