// Package retry is the one shape of a retry schedule in Cairn's options:
// the command bus deciding a command again after a version conflict
// (command.Options.Retry), a projection consumer running a failing
// handler again (projection.Options.Retry), and a saga runner stepping a
// failing message again (saga.RunnerOptions.Retry) all take a [Policy].
//
// It is a package of its own, with no dependencies, so that command,
// projection and saga can share it without importing each other, as they
// share time.Duration.
package retry

import "time"

// Policy says how many times an operation runs and how long to wait
// between its runs. The zero value is the default of the option that holds
// it: that option's number of attempts, waiting 10ms before the first
// retry and doubling up to 1s. Each wait is drawn at random from the upper
// half of its delay, so that processes that fail together retry apart.
type Policy struct {
	// Attempts is how many times the operation runs in all before it gives
	// up; zero or less means the default of the option that holds the
	// Policy (see its documentation), and one means no retry.
	Attempts int
	// Initial is the delay before the first retry; zero or less means 10ms.
	Initial time.Duration
	// Max caps the delay; zero or less means 1s.
	Max time.Duration
	// Multiplier grows the delay after each retry; zero (or less than 1)
	// means 2.
	Multiplier float64
}
