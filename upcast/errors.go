package upcast

import (
	"errors"
	"fmt"
)

// Set-up errors: [Chain.Add] and [Chain.Validate] return a [*ChainError]
// that matches one of these with errors.Is.
var (
	// ErrInvalidStep: a step is malformed on its own (empty name, nil
	// function, a rename to itself, a step from a current version, ...).
	ErrInvalidStep = errors.New("invalid upcast step")
	// ErrDuplicateStep: two steps apply to one (type, version).
	ErrDuplicateStep = errors.New("two upcast steps for one type and version")
	// ErrGap: a type has steps for some of its old versions but not for a
	// version between them, or between them and the current one.
	ErrGap = errors.New("gap in upcast chain")
	// ErrCycle: following steps from some (type, version) comes back to it.
	ErrCycle = errors.New("cycle in upcast chain")
	// ErrDeadEnd: a chain ends at a (type, version) that is neither
	// registered as current nor upcast further.
	ErrDeadEnd = errors.New("upcast chain does not end at a registered type and version")
)

// ErrStepFailed matches every [*StepError]: a step failed on one event at
// read time.
var ErrStepFailed = errors.New("upcast step failed")

// ChainError reports a problem with a chain found at set-up.
type ChainError struct {
	// Key is the type and version the problem is about.
	Key Key
	// Step describes the step involved, if one is.
	Step string
	// Reason says what is wrong, naming the types and versions involved.
	Reason string
	// Err is the sentinel: ErrInvalidStep, ErrDuplicateStep, ErrGap,
	// ErrCycle or ErrDeadEnd.
	Err error
}

// Error names the sentinel, the type and version, the step and the reason.
func (e *ChainError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("%v: %s: step %s %s", e.Err, e.Key, e.Step, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Key, e.Reason)
}

// Unwrap returns the sentinel.
func (e *ChainError) Unwrap() error { return e.Err }

// StepError reports a step that failed on one event: its function
// returned an error or panicked, or it yielded something it had not
// declared.
type StepError struct {
	// Step describes the step, such as `transform "order.placed" v1 -> "order.placed" v2`.
	Step string
	// Input is the type and version the step was given.
	Input Key
	// Err is the cause.
	Err error
}

// Error names the step, its input and the cause.
func (e *StepError) Error() string {
	return fmt.Sprintf("upcast step %s failed on %s: %v", e.Step, e.Input, e.Err)
}

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStepFailed) true.
func (e *StepError) Is(target error) bool { return target == ErrStepFailed }
