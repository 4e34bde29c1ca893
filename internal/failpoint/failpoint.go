// Package failpoint names the points in Cairn where a crash matters, and
// lets a test binary crash there for real.
//
// Each point is one call, failpoint.Hit(name), in the code path it names.
// In a normal build Hit is an empty function that the compiler inlines
// away: it costs nothing. In a build with the tag cairnfailpoints (on a
// Unix system) Hit counts the hits of each name, and when the environment
// variable CAIRN_FAILPOINT arms the name ("name" for its first hit,
// "name@n" for its n-th) the matching hit kills the process with SIGKILL:
// no deferred function runs, no buffer is flushed, no transaction is
// rolled back by the process. Before it dies it writes one line to
// standard error, "failpoint: name@n: SIGKILL", so that whoever ran it can
// tell the failpoint's kill from any other death.
//
// The crash matrix (internal/testrig/crashmatrix) runs the reservation flow in a
// child process per failpoint, store and seed, and checks that what the
// child and a clean restart did together has every effect exactly once.
package failpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Env is the environment variable that arms one failpoint, as "name" or
// "name@n" (n from 1).
const Env = "CAIRN_FAILPOINT"

// Tag is the build tag under which [Hit] can crash the process.
const Tag = "cairnfailpoints"

// The failpoints, in the order of a message's way through Cairn. Every
// Hit call names one of these; each is hit once per passage.
const (
	// BusAfterDecide: the command bus's aggregate has decided (events, a
	// rejection or nothing) and nothing is appended yet.
	BusAfterDecide = "bus.after-decide"
	// BusBeforeAppend: the bus is about to append the decision (the events,
	// or the rejection it records).
	BusBeforeAppend = "bus.before-append"
	// BusAfterAppend: the decision's append returned (committed, unless it
	// failed), and the caller has not been answered.
	BusAfterAppend = "bus.after-append"
	// CheckpointBeforeSave: a consumer (a saga runner's or a projection's)
	// has handled a batch and not moved its checkpoint past it. For a
	// transactional projection the batch's effects are in the open
	// transaction.
	CheckpointBeforeSave = "checkpoint.before-save"
	// CheckpointAfterSave: the checkpoint moved past the batch (for a
	// transactional projection: the transaction committed), and the
	// consumer has not read on.
	CheckpointAfterSave = "checkpoint.after-save"
	// SagaBeforeStepAppend: a saga instance's step is decided and its
	// record not yet appended.
	SagaBeforeStepAppend = "saga.before-step-append"
	// SagaAfterStepAppend: the step record's append returned, and the
	// runner's cache and deadline index have not been told.
	SagaAfterStepAppend = "saga.after-step-append"
	// OutboxAfterDispatch: the saga outbox's bus dispatch of a recorded
	// command returned, and the outbox has not moved past the record (nor
	// fed back a rejection).
	OutboxAfterDispatch = "outbox.after-dispatch"
	// DeadlineAfterFire: a deadline's step is appended, and the runner has
	// not gone on to the next due deadline.
	DeadlineAfterFire = "deadline.after-fire"
)

// Names returns every failpoint, in the order of the constants above.
func Names() []string {
	return []string{BusAfterDecide, BusBeforeAppend, BusAfterAppend, CheckpointBeforeSave, CheckpointAfterSave,
		SagaBeforeStepAppend, SagaAfterStepAppend, OutboxAfterDispatch, DeadlineAfterFire}
}

// Spec is an armed failpoint: the Hit-th hit of Name kills the process.
type Spec struct {
	Name string
	Hit  int64
}

// String returns the spec in the form [Env] takes.
func (s Spec) String() string { return s.Name + "@" + strconv.FormatInt(s.Hit, 10) }

// ErrSpec is matched (with errors.Is) by every [*SpecError].
var ErrSpec = errors.New("bad failpoint spec")

// SpecError is a value of [Env] that names no failpoint or no hit.
type SpecError struct {
	Value, Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("%s %s=%q: %s", ErrSpec, Env, e.Value, e.Reason)
}

// Is makes a SpecError match [ErrSpec].
func (e *SpecError) Is(target error) bool { return target == ErrSpec }

// Parse reads a spec in the form [Env] takes: "name" (its first hit) or
// "name@n", n from 1. An empty value is the zero Spec, which arms nothing.
func Parse(value string) (Spec, error) {
	if value == "" {
		return Spec{}, nil
	}
	name, hit, counted := strings.Cut(value, "@")
	s := Spec{Name: name, Hit: 1}
	if counted {
		n, err := strconv.ParseInt(hit, 10, 64)
		if err != nil || n < 1 {
			return Spec{}, &SpecError{Value: value, Reason: fmt.Sprintf("the hit %q after @ is not a number from 1", hit)}
		}
		s.Hit = n
	}
	for _, known := range Names() {
		if name == known {
			return s, nil
		}
	}
	return Spec{}, &SpecError{Value: value, Reason: fmt.Sprintf("%q is no failpoint (they are %s)", name, strings.Join(Names(), ", "))}
}
