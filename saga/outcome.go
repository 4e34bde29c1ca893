package saga

import (
	"fmt"
)

// Outcome says what a runner did with a message. It is meaningful only
// when the call that returned it returned no error.
type Outcome int

// Outcomes of [Runner.Deliver].
const (
	// Handled: the instance's handler ran and its step is stored.
	Handled Outcome = Outcome(handled)
	// Duplicate: the instance had handled (or held) this message before.
	Duplicate Outcome = Outcome(duplicate)
	// Ignored: the instance has not started and the event cannot start
	// it, or the instance is complete.
	Ignored Outcome = Outcome(ignored)
	// Held: the message is early, or the instance has a parked message; it
	// is kept in the instance's stream and handled in its turn.
	Held Outcome = Outcome(heldBack)
	// Parked: the handler kept failing; the message is parked for this
	// instance, which holds later messages behind it.
	Parked Outcome = Outcome(parkedOut)
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Handled:
		return "handled"
	case Duplicate:
		return "duplicate"
	case Ignored:
		return "ignored"
	case Held:
		return "held"
	case Parked:
		return "parked"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}
