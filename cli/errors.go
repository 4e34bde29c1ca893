package cli

import (
	"errors"
	"fmt"
)

var (
	// ErrNotConfirmed is the error of a command that changes state and was
	// not confirmed (exit code [ExitNotConfirmed]).
	ErrNotConfirmed = errors.New("not confirmed")
	// ErrAttention is doctor's error when it found something that needs
	// attention (exit code [ExitAttention]).
	ErrAttention = errors.New("needs attention")
	// ErrNeedsService is the error of a command that runs the service's
	// code (a saga's retry, a projection's rebuild) in a binary that was
	// given no [Options.Service].
	ErrNeedsService = errors.New("needs the service's code")
)

// UsageError is a command line that cannot run as written: an unknown
// command or flag, a missing or malformed argument, a store URL that no
// store opens, a store file that does not exist (exit code [ExitUsage]).
type UsageError struct {
	// Msg says what is wrong and what to write instead.
	Msg string
	// Err is the cause, when there is one.
	Err error
}

func (e *UsageError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *UsageError) Unwrap() error { return e.Err }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}
