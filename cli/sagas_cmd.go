package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/saga"
)

func (a *app) sagasCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sagas",
		Short: "List saga instances, explain them and unstick them",
		Long: `List saga types and instances (bare), and, in the service's binary, which knows
its saga types: explain an instance, list the parked instances and the gaps,
retry or skip a parked message, release a gap, redrive an instance, and look
after the dead letters of the saga's consumers.`,
	}
	c.AddCommand(a.sagasLs(), a.sagasExplain(), a.sagasParked(), a.sagasGaps(),
		a.sagasRetry(), a.sagasSkip(), a.sagasRelease(), a.sagasRedrive(), a.sagasDeadLetters())
	return c
}

// sagaNamed returns the mounted saga type called name, with its records
// loaded, or a [UsageError] that names the mounted types.
func (a *app) sagaNamed(ctx context.Context, what, name string) (SagaRunner, error) {
	svc, _, err := a.serviceOn(ctx, what)
	if err != nil {
		return nil, err
	}
	s, err := svc.saga(name)
	if err != nil {
		return nil, err
	}
	return s, s.load(ctx)
}

// saga finds the saga type called name among the service's.
func (svc *Service) saga(name string) (SagaRunner, error) {
	var known []string
	for i, s := range svc.Sagas {
		if s == nil || s.sagaName() == "" {
			return nil, fmt.Errorf("the service's Sagas[%d] is no saga runner (nil): make each with cli.Saga", i)
		}
		if s.sagaName() == name {
			return s, nil
		}
		known = append(known, s.sagaName())
	}
	if len(known) == 0 {
		return nil, usagef("no saga type %q: this binary mounts none", name)
	}
	return nil, usagef("no saga type %q: this binary mounts %s", name, strings.Join(sorted(known), ", "))
}

// sagaTypeRow is a saga type in sagas ls.
type sagaTypeRow struct {
	Saga      string     `json:"saga"`
	Instances int        `json:"instances"`
	Mounted   bool       `json:"mounted"`
	Stats     *sagaStats `json:"stats,omitempty"`
}

// sagaInstanceRow is an instance in sagas ls <type>.
type sagaInstanceRow struct {
	Instance     string              `json:"instance"`
	Stream       string              `json:"stream"`
	Version      uint64              `json:"version"`
	Steps        uint64              `json:"steps"`
	LastPosition eventstore.Position `json:"last_position"`
}

func (a *app) sagasLs() *cobra.Command {
	var after string
	var limit int
	c := &cobra.Command{
		Use:   "ls [type]",
		Short: "List saga types, or one type's instances",
		Long: `Without a type, list the saga types whose instances the store holds, with how
many; in the service's binary also each mounted type's parked instances, gaps,
held messages and pending deadlines. With a type, list its instances in ID
order: the version of the latest step (a step per message taken) and the
position of its record. --after resumes after the instance it names; --limit
bounds the listing.`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) > 1 {
				return usagef("%s takes at most a saga type, got %d arguments", cmd.CommandPath(), len(got))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			if err := notNegative("--limit", limit); err != nil {
				return err
			}
			var svc *Service
			var store eventstore.Store
			var err error
			if a.opts.Service != nil {
				svc, store, err = a.serviceOn(ctx, "sagas ls")
			} else {
				store, err = a.openStore(ctx, ReadOnly)
			}
			if err != nil {
				return err
			}
			if len(argv) == 1 {
				cat, err := catalogOf(store)
				if err != nil {
					return err
				}
				return a.sagaInstances(ctx, cat, svc, argv[0], after, limit)
			}
			return a.sagaTypes(ctx, store, svc)
		},
	}
	c.Flags().StringVar(&after, "after", "", "only instances whose IDs sort after this (to page)")
	c.Flags().IntVar(&limit, "limit", 0, "list at most this many instances (0: all)")
	return c
}

func (a *app) sagaTypes(ctx context.Context, store eventstore.Store, svc *Service) error {
	stored, err := sagaCounts(ctx, store)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, c := range stored {
		counts[c.Type] = c.Instances
	}
	mounted := map[string]SagaRunner{}
	if svc != nil {
		for _, s := range svc.Sagas {
			if s == nil || s.sagaName() == "" {
				_, err := svc.saga("")
				return err
			}
			mounted[s.sagaName()] = s
			if _, ok := counts[s.sagaName()]; !ok {
				counts[s.sagaName()] = 0
			}
		}
	}
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	rows := []sagaTypeRow{}
	for _, n := range sorted(names) {
		row := sagaTypeRow{Saga: n, Instances: counts[n]}
		if s, ok := mounted[n]; ok {
			if err := s.load(ctx); err != nil {
				return err
			}
			st, err := s.stats(ctx)
			if err != nil {
				return fmt.Errorf("saga %s: %w", n, err)
			}
			row.Mounted, row.Stats = true, &st
		}
		rows = append(rows, row)
	}
	return a.emit(rows, func(t *tableWriter) {
		if svc == nil {
			t.row("SAGA", "INSTANCES")
			for _, r := range rows {
				t.row(r.Saga, strconv.Itoa(r.Instances))
			}
			return
		}
		t.row("SAGA", "INSTANCES", "PARKED", "OLDEST PARKED", "GAPS", "HELD", "DEADLINES", "NEXT DEADLINE")
		for _, r := range rows {
			if r.Stats == nil {
				t.row(r.Saga, strconv.Itoa(r.Instances), "?", "-", "?", "?", "?", "- (not mounted)")
				continue
			}
			st := r.Stats
			t.row(r.Saga, strconv.Itoa(r.Instances), strconv.Itoa(st.ParkedInstances), when(st.OldestParked),
				strconv.Itoa(st.Gaps), strconv.Itoa(st.HeldMessages), strconv.Itoa(st.DeadlinesPending), when(st.NextDeadline))
		}
	})
}

func (a *app) sagaInstances(ctx context.Context, cat storekit.Catalog, svc *Service, typ, after string, limit int) error {
	if typ == "" || strings.ContainsAny(typ, "-:") {
		return usagef("%q is no saga type's name (a name has no \"-\" or \":\")", typ)
	}
	prefix := saga.StreamPrefix + typ + "-"
	from := ""
	if after != "" {
		from = prefix + after
	}
	rows := []sagaInstanceRow{}
	for s, err := range cat.Streams(ctx, prefix, from) {
		if err != nil {
			return err
		}
		rows = append(rows, sagaInstanceRow{strings.TrimPrefix(s.Name, prefix), s.Name, s.LastVersion, s.LastVersion + 1, s.LastPosition})
		if limit > 0 && len(rows) == limit {
			break
		}
	}
	// A type the store holds no instance of and the binary does not mount
	// is most likely a typing mistake: say which types there are.
	if len(rows) == 0 && after == "" && svc != nil {
		if _, err := svc.saga(typ); err != nil {
			return err
		}
	}
	return a.emit(rows, func(t *tableWriter) {
		t.row("INSTANCE", "VERSION", "STEPS", "LAST POSITION")
		for _, r := range rows {
			t.row(r.Instance, u64(r.Version), u64(r.Steps), position(r.LastPosition))
		}
	})
}

func (a *app) sagasExplain() *cobra.Command {
	return &cobra.Command{
		Use:   "explain <type> <instance>",
		Short: "Explain where a saga instance stands, and why it is stuck",
		Long: `Show an instance as its latest step left it: its state, the progress of each
source (watermarks), the messages it holds and what each waits for, the message
it is parked on (with the error and the attempts), its pending deadlines, the
commands its steps recorded and the outbox has not sent, and its latest redrive.
Runs in the service's binary, whose code reads the instance's state.`,
		Args: args(2, "type", "instance"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			s, err := a.sagaNamed(ctx, "sagas explain", argv[0])
			if err != nil {
				return err
			}
			x, err := s.explain(ctx, argv[1])
			if err != nil {
				return err
			}
			return a.emit(x, func(t *tableWriter) { explainTable(t, x) })
		},
	}
}

// explainTable writes an explanation for a person.
func explainTable(t *tableWriter, x sagaExplanation) {
	done := "running"
	if x.Completed {
		done = "completed"
	}
	t.line("saga %s, instance %s (stream %s): version %d, %s", x.Saga, x.Instance, x.Stream, x.Version, done)
	t.line("state: %s", oneLine(string(x.State)))
	if x.Unreadable != "" {
		t.line("unreadable: %s", oneLine(x.Unreadable))
	}
	t.line("watermarks: %s", sourceMarks(x.Watermarks))
	if len(x.Pending) > 0 {
		t.line("stored events waiting behind the parked message, read again from: %s", sourceMarks(x.Pending))
	}
	if p := x.Parked; p != nil {
		t.line("parked: %s", parkedLine(*p))
	} else {
		t.line("parked: -")
	}
	if len(x.Held) > 0 {
		t.line("held:")
		t.row("  ID", "KIND", "TYPE", "WAITS FOR", "SINCE")
		for _, h := range x.Held {
			waits := "the parked message"
			if h.Behind == "gap" {
				waits = fmt.Sprintf("%s #%d (a gap)", h.Source, h.WaitsFor)
			}
			t.row("  "+h.ID, h.Kind, h.Type, waits, when(h.Since))
		}
	}
	if len(x.Deadlines) > 0 {
		t.line("deadlines:")
		t.row("  NAME", "AT", "ID")
		for _, d := range x.Deadlines {
			t.row("  "+d.Name, when(d.At), d.ID)
		}
	}
	if len(x.Unsent) > 0 {
		t.line("unsent commands:")
		t.row("  ID", "TYPE", "COMMAND")
		for _, c := range x.Unsent {
			t.row("  "+c.ID, c.Type, string(c.Command))
		}
	}
	l := x.LastStep
	t.line("last step: version %d, %s %s %s, at %s", l.Version, l.Kind, l.Type, messageAt(l.Source, l.Sequence), when(l.At))
	if r := x.Redrive; r != nil {
		t.line("redriven at step %d from step %d: %d message(s) run again", r.Step, r.From, r.Messages)
		redriveRows(t, *r)
	}
}

// redriveRows writes the commands of a redrive and their fates.
func redriveRows(t *tableWriter, r sagaRedrive) {
	if len(r.Commands) == 0 {
		return
	}
	t.row("  COMMAND", "FATE", "TYPE", "FIRST RUN", "RE-RUN")
	for _, c := range r.Commands {
		t.row("  "+c.ID, c.Fate, c.Type, string(c.First), string(c.Now))
	}
}

// parkedLine says what a parked message is, why and since when.
func parkedLine(p sagaMessage) string {
	what := p.Kind + " " + p.Type
	switch {
	case p.Deadline != "":
		what += " (deadline " + p.Deadline + ")"
	case p.Command != "":
		what += " (command " + p.Command + ")"
	case p.Source != "":
		what += " " + messageAt(p.Source, p.Sequence)
	}
	return fmt.Sprintf("message %s, %s, since %s after %d attempt(s): %s", p.ID, what, when(p.Since), p.Attempts, oneLine(p.Error))
}

func messageAt(source string, seq uint64) string {
	if source == "" {
		return ""
	}
	return fmt.Sprintf("%s #%d", source, seq)
}

func sourceMarks(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	var parts []string
	for _, k := range sorted(keys) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func (a *app) sagasParked() *cobra.Command {
	return &cobra.Command{
		Use:   "parked <type>",
		Short: "List the instances parked on a message, longest parked first",
		Long: `List the instances of a saga type parked on a message: a handler kept failing on
it, and the instance holds what follows behind it. Fix the cause, then
sagas retry (or sagas skip) the message by its ID.`,
		Args: args(1, "type"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.sagaNamed(cmd.Context(), "sagas parked", argv[0])
			if err != nil {
				return err
			}
			rows := s.parked()
			return a.emit(rows, func(t *tableWriter) {
				t.row("INSTANCE", "MESSAGE", "KIND", "TYPE", "ATTEMPTS", "SINCE", "HELD", "ERROR")
				for _, r := range rows {
					m := r.Message
					t.row(r.Instance, m.ID, m.Kind, m.Type, strconv.Itoa(m.Attempts), when(m.Since), strconv.Itoa(r.Held), m.Error)
				}
			})
		},
	}
}

func (a *app) sagasGaps() *cobra.Command {
	return &cobra.Command{
		Use:   "gaps <type>",
		Short: "List the gaps that instances wait for, oldest first",
		Long: `List the gaps of a saga type: deliveries of a source held by an instance until
the message before them arrives. Wait for the source; release a gap that will
never fill with sagas release <type> <instance> <source> <waits-for>.`,
		Args: args(1, "type"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.sagaNamed(cmd.Context(), "sagas gaps", argv[0])
			if err != nil {
				return err
			}
			rows := s.gaps()
			return a.emit(rows, func(t *tableWriter) {
				t.row("INSTANCE", "SOURCE", "WAITS FOR", "HELD", "SINCE")
				for _, r := range rows {
					t.row(r.Instance, r.Source, u64(r.WaitsFor), strconv.Itoa(r.Held), when(r.Since))
				}
			})
		},
	}
}
