package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
)

// storeEnv names the environment variable that gives --store its default.
const storeEnv = "CAIRN_STORE"

// app is one run of the command line: its options, its global flags, and
// the store and service it opened (closed when the command ends).
type app struct {
	opts           Options
	name           string
	stdin          io.Reader
	stdout, stderr io.Writer

	storeURL string
	asJSON   bool
	yes      bool

	store   eventstore.Store
	service *Service
}

func newApp(opts Options) *app {
	name := opts.Name
	if name == "" {
		name = "cairn"
	}
	return &app{
		opts:   opts,
		name:   name,
		stdin:  orStdin(opts.Stdin),
		stdout: orWriter(opts.Stdout, os.Stdout),
		stderr: orWriter(opts.Stderr, os.Stderr),
	}
}

// commands are the top-level commands, each built by a function of its own
// file; root adds them in this order.
var commands = []func(a *app) *cobra.Command{
	(*app).streamsCommand,
	(*app).eventsCommand,
	(*app).projectionsCommand,
	(*app).deadLettersCommand,
	(*app).doctorCommand,
	(*app).sagasCommand,
	(*app).copyCommand,
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   a.name,
		Short: "Look at a Cairn event store and steer the consumers kept in it",
		Long: a.name + ` looks at a Cairn event store (SQLite, PostgreSQL or KurrentDB) and steers the
projections and sagas whose state it keeps: lists and reads streams and events,
shows checkpoints, leases and dead letters, rebuilds and resets projections,
explains and unsticks saga instances, copies a store to another, and checks a
store's health.

The store is named by a URL, in --store or in ` + storeEnv + `:
  sqlite:///var/lib/app/events.db     a SQLite file (sqlite:events.db is relative)
  postgres://user@host:5432/db        a PostgreSQL database (?schema=name, default cairn)
  kurrentdb://host:2113, esdb://...   a KurrentDB server (the cairn binary only)

Commands read unless they say otherwise, on a store opened read-only where the
store allows it. A command that changes state says what it will do and asks;
off a terminal it needs --yes. --json prints JSON for scripts (docs/cli.md).

Exit codes: 0 done, 1 failed, 2 wrong command line, 3 doctor found something
that needs attention, 4 a change was not confirmed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPostRunE: func(cmd *cobra.Command, _ []string) error {
			return a.close()
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &UsageError{Msg: err.Error()}
	})
	flags := root.PersistentFlags()
	flags.StringVar(&a.storeURL, "store", os.Getenv(storeEnv), "the store's URL (default $"+storeEnv+")")
	flags.BoolVar(&a.asJSON, "json", false, "print JSON for scripts instead of tables")
	flags.BoolVarP(&a.yes, "yes", "y", false, "make the change without asking")
	for _, c := range commands {
		root.AddCommand(c(a))
	}
	refuseUnknownCommands(root)
	return root
}

// refuseUnknownCommands makes every command that only groups others (the
// root, streams, sagas, ...) print its help when given no command, and
// refuse an unknown one as a usage error (exit 2). Cobra would print the
// help and exit 0, so that a typo in a script would look like success.
func refuseUnknownCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownCommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2 // cobra's own default, which it applies only itself
	c.RunE = func(cmd *cobra.Command, argv []string) error {
		if len(argv) == 0 {
			return cmd.Help()
		}
		hint := ""
		if s := cmd.SuggestionsFor(argv[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
		}
		return usagef("unknown command %q for %q%s", argv[0], cmd.CommandPath(), hint)
	}
}

// reportError writes err for the person who ran the command; with --json,
// also as a JSON object on stdout, so that a script reads why.
func (a *app) reportError(err error) {
	_ = a.close()
	var u *UsageError
	hint := ""
	if errors.As(err, &u) {
		hint = fmt.Sprintf(" (see %s --help)", a.name)
	}
	fmt.Fprintf(a.stderr, "%s: %v%s\n", a.name, err, hint)
	// doctor's findings are its JSON already: a second object would
	// break a script reading stdout as one document.
	if a.asJSON && !errors.Is(err, ErrAttention) {
		_ = writeJSON(a.stdout, struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}{err.Error(), exitCode(err)})
	}
}

// args checks a command's positional arguments, as cobra's validators do,
// but with a [UsageError] that names them.
func args(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == n {
			return nil
		}
		return usagef("%s takes %d argument(s) (%s), got %d", cmd.CommandPath(), n, strings.Join(names, ", "), len(got))
	}
}

// openStore opens the store named by --store, once per run: read-only
// unless the command changes state.
func (a *app) openStore(ctx context.Context, mode Mode) (eventstore.Store, error) {
	if a.store != nil {
		return a.store, nil
	}
	if a.storeURL == "" {
		return nil, usagef("no store: give --store URL or set %s", storeEnv)
	}
	s, err := open(ctx, a.storeURL, mode, a.opts.Stores)
	if err != nil {
		return nil, err
	}
	a.store = s
	return s, nil
}

// serviceOn returns the service built on the command's store, for the
// commands that run its code.
func (a *app) serviceOn(ctx context.Context, what string) (*Service, eventstore.Store, error) {
	if a.opts.Service == nil {
		return nil, nil, fmt.Errorf("%s runs the service's handlers: run it from the service's binary, which mounts these commands with its types (docs/cli.md): %w", what, ErrNeedsService)
	}
	store, err := a.openStore(ctx, ReadWrite)
	if err != nil {
		return nil, nil, err
	}
	if a.service == nil {
		svc, err := a.opts.Service(ctx, store)
		if err != nil {
			return nil, nil, fmt.Errorf("building the service on the store: %w", err)
		}
		a.service = svc
	}
	return a.service, store, nil
}

func (a *app) close() error {
	var errs []error
	if a.service != nil && a.service.Close != nil {
		errs = append(errs, a.service.Close())
	}
	a.service = nil
	if a.store != nil {
		errs = append(errs, a.store.Close())
	}
	a.store = nil
	return errors.Join(errs...)
}
