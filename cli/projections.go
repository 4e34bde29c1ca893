package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/projection"
)

// ProjectionConsumer is one of the service's projections, as the
// projections and deadletters commands use it; [Projection] and
// [TxProjection] make one from a projection consumer. Its methods are
// unexported so that only those two make one: the commands rely on what
// they do.
type ProjectionConsumer interface {
	consumerName() string
	consumer() *projection.Consumer
	// rebuild resets the read model (the service's code) and replays.
	rebuild(ctx context.Context, opts projection.RebuildOptions) error
	// resets reports whether a rebuild drops the read model first.
	resets() bool
}

// ProjectionOptions are what a service tells the command line about one
// of its projections.
type ProjectionOptions struct {
	// Reset drops the projection's read model, which projections rebuild
	// does before it replays the log: the read model is the service's,
	// so only its code can clear it. nil leaves the read model as it is,
	// and the replayed events are applied on top of it (right only for a
	// read model whose handlers overwrite rather than add).
	Reset func(ctx context.Context) error
}

// Projection mounts a projection consumer made with [projection.New]
// (or NewTx, when its reset needs no transaction) for the projections and
// deadletters commands: rebuild, a dead letter's retry and skip, and its
// figures in ls, status and doctor. Give at most one ProjectionOptions;
// the Reset of a later one replaces an earlier one's.
func Projection(c *projection.Consumer, opts ...ProjectionOptions) ProjectionConsumer {
	return &plainProjection{c: c, opts: mergeProjectionOptions(opts)}
}

// TxProjection mounts a transactional projection consumer (made with
// [projection.NewTx] and transactions of type Tx) whose read model is
// reset in the transaction that moves its checkpoint back
// ([projection.RebuildTx]): a rebuild interrupted at any point leaves the
// old read model and checkpoint or the reset ones, never a mix. opts'
// Reset, if any, runs first, outside that transaction.
func TxProjection[Tx any](c *projection.Consumer, reset func(ctx context.Context, tx Tx) error, opts ...ProjectionOptions) ProjectionConsumer {
	return &txProjection[Tx]{plainProjection: plainProjection{c: c, opts: mergeProjectionOptions(opts)}, reset: reset}
}

func mergeProjectionOptions(opts []ProjectionOptions) ProjectionOptions {
	var o ProjectionOptions
	for _, x := range opts {
		if x.Reset != nil {
			o.Reset = x.Reset
		}
	}
	return o
}

type plainProjection struct {
	c    *projection.Consumer
	opts ProjectionOptions
}

func (p *plainProjection) consumerName() string {
	if p.c == nil {
		return ""
	}
	return p.c.Name()
}

func (p *plainProjection) consumer() *projection.Consumer { return p.c }
func (p *plainProjection) resets() bool                   { return p.opts.Reset != nil }

func (p *plainProjection) rebuild(ctx context.Context, opts projection.RebuildOptions) error {
	opts.Reset = p.opts.Reset
	return p.c.Rebuild(ctx, opts)
}

type txProjection[Tx any] struct {
	plainProjection
	reset func(ctx context.Context, tx Tx) error
}

func (p *txProjection[Tx]) resets() bool { return p.reset != nil || p.opts.Reset != nil }

func (p *txProjection[Tx]) rebuild(ctx context.Context, opts projection.RebuildOptions) error {
	if p.reset == nil {
		return p.plainProjection.rebuild(ctx, opts)
	}
	opts.Reset = p.opts.Reset
	return projection.RebuildTx(ctx, p.c, p.reset, opts)
}

// mounted returns the service's projections by name, refusing a nil one
// (a mistake in the service's set-up, which must not crash the tool).
func mounted(svc *Service) (map[string]ProjectionConsumer, error) {
	m := map[string]ProjectionConsumer{}
	if svc == nil {
		return m, nil
	}
	for i, p := range svc.Projections {
		if p == nil || p.consumer() == nil {
			return nil, fmt.Errorf("the service's projection %d is nil: fix Service.Projections in the service's set-up", i)
		}
		m[p.consumerName()] = p
	}
	return m, nil
}

// mountedProjection returns the service's projection named name, or an
// error that says where the consumer can be worked on instead.
// projectionOn returns the service's projection name, with the service
// and the store it was built on, for command (which names it) to do what
// (a verb for the error when name is not one of the service's).
func (a *app) projectionOn(ctx context.Context, command, name, what string) (ProjectionConsumer, *Service, eventstore.Store, error) {
	svc, store, err := a.serviceOn(ctx, command)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := a.mountedProjection(svc, name, what)
	if err != nil {
		return nil, nil, nil, err
	}
	return p, svc, store, nil
}

func (a *app) mountedProjection(svc *Service, name, what string) (ProjectionConsumer, error) {
	m, err := mounted(svc)
	if err != nil {
		return nil, err
	}
	if p, ok := m[name]; ok {
		return p, nil
	}
	if strings.HasPrefix(name, "saga:") {
		return nil, fmt.Errorf("consumer %q is a saga's, not a projection: %s it with %s sagas commands (sagas retry, sagas skip), in the service's binary", name, what, a.name)
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	mountedList := "none"
	if len(names) > 0 {
		mountedList = strings.Join(sorted(names), ", ")
	}
	return nil, fmt.Errorf("consumer %q is not one of this service's projections (it mounts %s): %s it from the binary of the service that runs it", name, mountedList, what)
}

// refuseLiveLease refuses to move a consumer's checkpoint while another
// process holds its lease: the holder would overwrite the move with its
// next save, or (when the move raised the fence) be stopped mid-batch.
// Stopping it, or waiting for the lease to lapse, is the safe order.
func refuseLiveLease(name, what string, holder string, expires time.Time) error {
	return fmt.Errorf("cannot %s %q: its lease is held by %q until %s; stop the process that runs it (or wait for the lease to lapse), then run this again",
		what, name, holder, when(expires))
}

var errNoPosition = errors.New("give one of --to-start and --after POSITION")

func (a *app) projectionsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "projections",
		Short: "Show consumers' checkpoints, leases and lag; reset or rebuild a projection",
		Long: `Every consumer the store keeps something for (a checkpoint, a lease, dead
letters) is listed: projections, and the consumers of saga runners ("saga:..."),
which are consumers too. Pending counts the events after a consumer's
checkpoint that it reads, up to ` + fmt.Sprint(pendingCap) + ` (then printed with a "+"); lag is how much
older the first of them is than the newest event. That takes the consumer's
filter, which is known for the service's projections and sagas in its binary,
and for a saga's consumers from what the store records; for any other consumer
every event after its checkpoint is counted, an upper bound printed with a "?"
(pending_exact false in JSON): a filtered consumer's checkpoint stays at the
last event it read, however many events of other types follow.`,
	}
	c.AddCommand(a.projectionsLs(), a.projectionsStatus(), a.projectionsReset(), a.projectionsRebuild())
	return c
}

func (a *app) projectionsLs() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List consumers with checkpoint, lease, dead letters and lag",
		Args:  args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, svc, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			head, err := readHead(ctx, store)
			if err != nil {
				return fmt.Errorf("reading the newest event: %w", err)
			}
			rows, err := consumerRows(ctx, store, svc, head)
			if err != nil {
				return err
			}
			return a.emit(rows, func(t *tableWriter) {
				head := []string{"CONSUMER", "CHECKPOINT", "SAVED", "LEASE HOLDER", "LEASE EXPIRES", "DEAD LETTERS", "PENDING", "LAG"}
				if svc != nil {
					head = append(head, "SERVICE")
				}
				t.row(head...)
				for _, r := range rows {
					holder, expires := r.leaseCell()
					cells := []string{r.Name, r.checkpointCell(), when(r.CheckpointSaved), holder, expires,
						fmt.Sprint(r.DeadLetters), r.pendingCell(), r.lagCell()}
					if svc != nil {
						cells = append(cells, map[bool]string{true: "projection", false: "-"}[r.Mounted])
					}
					t.row(cells...)
				}
			})
		},
	}
}

// statusRow is projections status --json: the consumer's row and its
// oldest dead letter.
type statusRow struct {
	consumerRow
	Oldest *deadLetterRow `json:"oldest,omitempty"`
}

func (a *app) projectionsStatus() *cobra.Command {
	return &cobra.Command{
		Use:   "status <consumer>",
		Short: "Show one consumer in detail, with its oldest dead letter",
		Args:  args(1, "consumer"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			name := argv[0]
			store, svc, err := a.lookAt(ctx)
			if err != nil {
				return err
			}
			all, err := listConsumers(ctx, store)
			if err != nil {
				return err
			}
			info, err := a.findConsumer(ctx, store, name)
			if err != nil {
				// A mounted projection that never ran has nothing stored
				// yet, and is no mistake.
				m, merr := mounted(svc)
				if _, ok := m[name]; merr != nil || !ok {
					return err
				}
				info.Name = name
			}
			head, err := readHead(ctx, store)
			if err != nil {
				return fmt.Errorf("reading the newest event: %w", err)
			}
			known, err := consumerFilters(ctx, store, svc, append(all, info))
			if err != nil {
				return err
			}
			r, err := consumerRowOf(ctx, store, info, head, time.Now(), filterOf(known, name))
			if err != nil {
				return err
			}
			rows, err := markMounted(ctx, store, svc, []consumerRow{r})
			if err != nil {
				return err
			}
			rows = slices.DeleteFunc(rows, func(x consumerRow) bool { return x.Name != name })
			s := statusRow{consumerRow: rows[0]}
			if r.DeadLetters > 0 {
				src, err := a.deadLettersOf(ctx, store, svc, name)
				if err != nil {
					return err
				}
				for d, err := range src.list(ctx) {
					if err != nil {
						return fmt.Errorf("consumer %q: reading its dead letters: %w", name, err)
					}
					row := deadLetterRowOf(d, false)
					s.Oldest = &row
					break
				}
			}
			return a.emit(s, func(t *tableWriter) { s.table(t) })
		},
	}
}

func (s statusRow) table(t *tableWriter) {
	t.row("consumer", s.Name)
	cp := s.checkpointCell()
	if !s.CheckpointSaved.IsZero() {
		cp += " (saved " + when(s.CheckpointSaved) + ")"
	}
	t.row("checkpoint", cp)
	holder, expires := s.leaseCell()
	switch {
	case holder == "-":
		t.row("lease", "none")
	case expires == "lapsed":
		t.row("lease", "lapsed (last held by "+holder+")")
	default:
		t.row("lease", "held by "+holder+" until "+expires)
	}
	pending := s.pendingCell() + " events after the checkpoint that it reads"
	if !s.PendingExact {
		pending = s.pendingCell() + " events after the checkpoint, of any type: at most that many are its own, as its filter is unknown here (the service's binary knows its projections')"
	}
	t.row("pending", pending)
	t.row("lag", s.lagCell())
	dl := fmt.Sprint(s.DeadLetters)
	if s.DeadLetters > 0 {
		dl += " (oldest failed first " + when(s.OldestDeadLetter) + ")"
	}
	t.row("dead letters", dl)
	if o := s.Oldest; o != nil {
		t.row("oldest dead letter", o.ID+": "+o.Stream+" version "+u64(o.Version)+" ("+o.Type+"), "+fmt.Sprint(o.Attempts)+" attempts: "+o.Error)
	}
	if st := s.Stats; st != nil {
		t.row("service", fmt.Sprintf("projection mounted here: %d handled, %.0f events/s, %d parked, head %s, leader %t",
			st.Handled, st.Rate, st.Parked, position(st.Head), st.Leader))
	}
}

// resetRow is projections reset --json.
type resetRow struct {
	Consumer string              `json:"consumer"`
	From     eventstore.Position `json:"from"`
	To       eventstore.Position `json:"to"`
}

func (a *app) projectionsReset() *cobra.Command {
	var toStart bool
	var after string
	c := &cobra.Command{
		Use:   "reset <consumer> (--to-start | --after POSITION)",
		Short: "Move a consumer's checkpoint back (or forward), so that its next run starts there",
		Long: `Move a consumer's checkpoint to the start of the log (--to-start), or to just
after a position (--after major:minor, as printed), so that the next run of the
consumer applies every event after it. The read model is not touched: a
projection's rebuild, which drops it first, runs in the service's binary.

While the consumer's lease is held, the checkpoint is not moved: the holder
would overwrite the move. Stop the process that runs it (or wait for the lease
to lapse) first.`,
		Args: args(1, "consumer"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			name := argv[0]
			if toStart == (after != "") {
				return &UsageError{Msg: "projections reset " + name, Err: errNoPosition}
			}
			target := eventstore.Start
			if after != "" {
				var err error
				if target, err = eventstore.ParsePosition(after); err != nil {
					return &UsageError{Msg: fmt.Sprintf("--after %q: a position as printed (major:minor)", after), Err: err}
				}
			}
			store, err := a.openStore(ctx, ReadWrite)
			if err != nil {
				return err
			}
			info, err := a.findConsumer(ctx, store, name)
			if err != nil {
				return err
			}
			if liveLease(info, time.Now()) {
				return refuseLiveLease(name, "reset the checkpoint of", info.Lease.Holder, info.Lease.Expires)
			}
			head, err := headOf(ctx, store)
			if err != nil {
				return err
			}
			if head.Before(target) {
				return usagef("--after %s is past the newest event of the store (%s)", target, position(head))
			}
			cps, ok := store.(storekit.CheckpointStore)
			if !ok {
				return fmt.Errorf("this store (%T) keeps no checkpoints", store)
			}
			from := info.Checkpoint.Position
			to := "the start: the next run applies every event again"
			if !target.IsZero() {
				to = target.String() + ": the next run applies the events after it"
			}
			if err := a.confirm(fmt.Sprintf("Reset consumer %s's checkpoint from %s to %s; its read model is not dropped (a rebuild, in the service's binary, drops it).",
				name, positionOrStart(from), to)); err != nil {
				return err
			}
			// The save is a compare-and-set on the checkpoint read above,
			// under its fence: a process that took the lease since and
			// claimed the checkpoint (a save under a higher fence) makes it
			// fail, and one that takes it later resumes from the new
			// position.
			if err := cps.SaveCheckpoint(ctx, name, from, target, info.Checkpoint.Fence); err != nil {
				if errors.Is(err, eventstore.ErrCheckpointMoved) || errors.Is(err, eventstore.ErrFenced) {
					return fmt.Errorf("consumer %q: the checkpoint moved meanwhile, so a process runs it; nothing was changed: %w", name, err)
				}
				return fmt.Errorf("consumer %q: saving the checkpoint: %w", name, err)
			}
			row := resetRow{Consumer: name, From: from, To: target}
			return a.emit(row, func(t *tableWriter) {
				t.line("consumer %s: checkpoint moved from %s to %s", name, positionOrStart(from), positionOrStart(target))
			})
		},
	}
	c.Flags().BoolVar(&toStart, "to-start", false, "move the checkpoint to the start of the log")
	c.Flags().StringVar(&after, "after", "", "move the checkpoint to just after this position (major:minor)")
	return c
}

func positionOrStart(p eventstore.Position) string {
	if p.IsZero() {
		return "the start"
	}
	return p.String()
}

// rebuildRow is projections rebuild --json.
type rebuildRow struct {
	Consumer   string              `json:"consumer"`
	Replayed   uint64              `json:"replayed"`
	Checkpoint eventstore.Position `json:"checkpoint"`
	Reset      bool                `json:"reset"`
}

func (a *app) projectionsRebuild() *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild <projection>",
		Short: "Drop a projection's read model and replay the log into it (in the service's binary)",
		Long: `Rebuild one of the service's projections: its reset (the service's code) drops
the read model, the checkpoint moves to the start, and every event is applied
again, with a progress bar. It runs the service's handlers, so it works only in
the binary of a service that mounts its projections (docs/cli.md).`,
		Args: args(1, "projection"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			name := argv[0]
			p, _, store, err := a.projectionOn(ctx, "projections rebuild", name, "rebuild")
			if err != nil {
				return err
			}
			// Rebuild takes the lease as a run does, so it would wait for a
			// running instance: say who holds it instead.
			if info, err := a.findConsumer(ctx, store, name); err == nil && liveLease(info, time.Now()) {
				return refuseLiveLease(name, "rebuild", info.Lease.Holder, info.Lease.Expires)
			}
			plan := fmt.Sprintf("Rebuild projection %s: drop its read model (the service's reset), move its checkpoint to the start and apply every event again; the dead letters of events that now succeed are deleted.", name)
			if !p.resets() {
				plan = fmt.Sprintf("Rebuild projection %s: move its checkpoint to the start and apply every event again; the service gave no reset, so its read model is not dropped and the events are applied on top of it; the dead letters of events that now succeed are deleted.", name)
			}
			if err := a.confirm(plan); err != nil {
				return err
			}
			prog := a.newProgress("rebuilding " + name)
			var done uint64
			err = p.rebuild(ctx, projection.RebuildOptions{Count: true, Progress: func(pr projection.Progress) {
				done = pr.Done
				prog.set(int64(pr.Done), int64(pr.Total))
			}})
			prog.finish()
			if err != nil {
				return fmt.Errorf("rebuilding projection %q: %w", name, err)
			}
			st, err := p.consumer().Stats(ctx)
			if err != nil {
				return fmt.Errorf("projection %q: reading its checkpoint: %w", name, err)
			}
			row := rebuildRow{Consumer: name, Replayed: done, Checkpoint: st.Checkpoint, Reset: p.resets()}
			return a.emit(row, func(t *tableWriter) {
				t.line("projection %s rebuilt: %d events applied, checkpoint at %s", name, done, position(st.Checkpoint))
			})
		},
	}
}
