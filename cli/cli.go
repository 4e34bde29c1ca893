// Package cli is Cairn's operator command line as a library: the commands
// of the cairn binary (cmd/cairn), which look at a store and steer the
// consumers kept in it, and which a service mounts in its own binary so
// that the actions that run the service's code work there too.
//
// The bare cairn binary knows no user's types. It lists and reads streams
// and events, shows consumers' checkpoints, leases and dead letters,
// resets a projection's checkpoint, skips a dead letter, copies a store
// and checks one's health (doctor). A saga's explain, retry, skip, release
// and redrive, a projection's rebuild and a dead letter's retry run the
// service's handlers, so they need the service's saga types and consumers:
// a service gives them in [Options.Service] and calls [Main] from its own
// main, for instance behind an "admin" argument:
//
//	if len(os.Args) > 1 && os.Args[1] == "admin" {
//		os.Exit(cli.Main(ctx, os.Args[2:], cli.Options{Service: mount}))
//	}
//
// Output is a table for people or, with --json, JSON whose field names are
// stable (docs/cli.md lists them); the exit codes are the Exit constants.
// Commands read by default, opening the store read-only where the store
// allows it; a command that changes state says what it will do and goes on
// when the person at the terminal agrees, or when --yes is given.
package cli

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
)

// Exit codes of [Main], which scripts can rely on.
const (
	// ExitOK: the command did what it was asked; doctor found nothing that
	// needs attention.
	ExitOK = 0
	// ExitFailed: the command failed: the store refused or could not be
	// reached, or what it names does not exist.
	ExitFailed = 1
	// ExitUsage: the command line is wrong: an unknown command or flag, a
	// missing argument, a store URL no store opens, a store file that does
	// not exist.
	ExitUsage = 2
	// ExitAttention: doctor found something that needs attention (a lagging
	// or unleased consumer, dead letters, parked saga instances, gaps).
	ExitAttention = 3
	// ExitNotConfirmed: a command that changes state was not confirmed:
	// the answer was not yes, or no one was at a terminal to ask and
	// --yes was not given. Nothing was changed.
	ExitNotConfirmed = 4
)

// Options configure the command line. The zero value is the bare cairn
// binary's set-up on the SQLite and PostgreSQL stores.
type Options struct {
	// Stores opens stores of URL schemes other than sqlite, postgres and
	// postgresql, keyed by scheme (the cairn binary adds kurrentdb and
	// esdb). An entry for sqlite or postgres replaces the built-in one.
	Stores map[string]Opener

	// Service builds the service's saga runners and projections on the
	// store a command opened, for the commands that run the service's code;
	// nil in the bare binary, where those commands say that they need it.
	Service func(ctx context.Context, store eventstore.Store) (*Service, error)

	// Stdin, Stdout and Stderr are the streams the commands use; nil means
	// the process's own. Prompts are asked only when Stdin is a terminal.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Name is the command's name in help and messages; "" means "cairn".
	Name string
}

// Main runs the command line args (without the program name, as in
// os.Args[1:]) and returns its exit code; errors are reported on Stderr.
func Main(ctx context.Context, args []string, opts Options) int {
	a := newApp(opts)
	root := a.root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	a.reportError(err)
	return exitCode(err)
}

// Command returns the command line as a cobra command, for a service that
// has a cobra command tree of its own to add it to. Its RunE functions
// return errors that [ExitCode] maps to the exit codes of [Main].
func Command(opts Options) *cobra.Command {
	return newApp(opts).root()
}

// ExitCode returns the exit code [Main] gives for an error that a command
// of [Command] returned.
func ExitCode(err error) int { return exitCode(err) }

func exitCode(err error) int {
	var u *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	case errors.Is(err, ErrNotConfirmed):
		return ExitNotConfirmed
	case errors.Is(err, ErrAttention):
		return ExitAttention
	default:
		return ExitFailed
	}
}

func orStdin(r io.Reader) io.Reader {
	if r == nil {
		return os.Stdin
	}
	return r
}

func orWriter(w io.Writer, def *os.File) io.Writer {
	if w == nil {
		return def
	}
	return w
}
