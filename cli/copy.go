package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/redact"
)

// copyReport is copy's --json output: storecopy.Report with stable
// snake_case names.
type copyReport struct {
	From         string              `json:"from"`
	To           string              `json:"to"`
	Checkpoint   string              `json:"checkpoint"`
	ResumedAfter eventstore.Position `json:"resumed_after"`
	Last         eventstore.Position `json:"last"`
	Copied       int64               `json:"copied"`
	Duplicates   int64               `json:"duplicates"`
	Appends      int64               `json:"appends"`
	Consumers    int64               `json:"consumers"`
	DeadLetters  int64               `json:"dead_letters"`
	Snapshots    int64               `json:"snapshots"`
	// ElapsedSeconds is the copy's time, verification included.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Verification is null with --no-verify.
	Verification *copyVerification `json:"verification"`
}

type copyVerification struct {
	Streams    int            `json:"streams"`
	Events     int64          `json:"events"`
	Mismatches []copyMismatch `json:"mismatches"`
}

type copyMismatch struct {
	Stream       string `json:"stream"`
	Version      uint64 `json:"version"`
	SourceEvents uint64 `json:"source_events"`
	TargetEvents uint64 `json:"target_events"`
	SourceDigest string `json:"source_digest"`
	TargetDigest string `json:"target_digest"`
}

func (a *app) copyCommand() *cobra.Command {
	var from, to, name string
	var consumers, snapshots, noVerify bool
	c := &cobra.Command{
		Use:   "copy --from URL --to URL",
		Short: "Copy every event of a store into another, resumably",
		Long: `Copy every event of the store --from into the store --to, in global order, with
the same event IDs, stream versions, types, schema versions, data and metadata
(positions and recording times are the target's own). The target is created
when it does not exist. The copy keeps its progress in the target: run the same
command again after a stop or a crash and it resumes, never duplicating an event.
At the end it compares every copied stream in both stores (--no-verify skips it).

--consumers copies the projections' and sagas' checkpoints (translated to the
target's positions) and dead letters too; --snapshots the aggregates' snapshots.
Consumer state is copied as it is when the copy reads it: to move a service,
copy while it runs, stop it, then run the copy again with --consumers.

--name names the copy's progress (default: derived from the source). --store is
not used: copy names both stores itself. The source is opened read-only.

Exit 1 when the target holds other events where the source's go (nothing is
appended after that stream) or when the verification finds streams that differ.`,
		Args: args(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usagef("copy needs both --from and --to")
			}
			return a.runCopy(cmd.Context(), from, to, storecopy.Options{
				Name: name, Consumers: consumers, Snapshots: snapshots, NoVerify: noVerify,
			})
		},
	}
	f := c.Flags()
	f.StringVar(&from, "from", "", "the source store's URL")
	f.StringVar(&to, "to", "", "the target store's URL (created when it does not exist)")
	f.StringVar(&name, "name", "", "the name the copy keeps its progress under in the target (default: from the source)")
	f.BoolVar(&consumers, "consumers", false, "copy consumers' checkpoints (translated) and dead letters too")
	f.BoolVar(&snapshots, "snapshots", false, "copy aggregates' snapshots too")
	f.BoolVar(&noVerify, "no-verify", false, "skip the comparison of both stores at the end")
	return c
}

func (a *app) runCopy(ctx context.Context, fromURL, toURL string, opts storecopy.Options) (err error) {
	from, err := open(ctx, fromURL, ReadOnly, a.opts.Stores)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, from.Close()) }()
	if err := a.refuseSameStore(ctx, from, fromURL, toURL); err != nil {
		return err
	}

	n, err := countEvents(ctx, from)
	if err != nil {
		return fmt.Errorf("count the source's events: %w", err)
	}
	also := ""
	switch {
	case opts.Consumers && opts.Snapshots:
		also = ", with consumers' state and snapshots"
	case opts.Consumers:
		also = ", with consumers' state"
	case opts.Snapshots:
		also = ", with snapshots"
	}
	plan := fmt.Sprintf("copy %d events%s\n  from %s\n  to   %s\na rerun resumes where a stopped copy left off",
		n, also, redact.ConnString(fromURL), redact.ConnString(toURL))
	if opts.Consumers {
		plan += "\nthe checkpoints move, the read models do not: reset on the target each projection whose tables are in the source's database (projections reset NAME --to-start), and the service rebuilds them"
	}
	if err := a.confirm(plan); err != nil {
		return err
	}
	// Only now: opening the target creates it (a SQLite file, a
	// PostgreSQL schema), which a copy not confirmed must not do.
	to, err := open(ctx, toURL, Create, a.opts.Stores)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, to.Close()) }()

	bar := a.newProgress("copy")
	opts.Progress = func(p storecopy.Progress) { bar.set(p.Done, p.Total) }
	opts.ProgressEvery = barEvery // the bar redraws at that pace; storecopy's default is a second
	r, err := storecopy.Copy(ctx, from, to, opts)
	bar.finish()
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(a.stderr, "copy stopped after %d events; run the same command again to resume\n", r.Copied+r.Duplicates)
	}
	if err != nil && (a.asJSON || !errors.Is(err, storecopy.ErrMismatch)) {
		// The error says it all; with --json, reportError prints it as
		// the one JSON object on stdout.
		return err
	}
	rep := reportOf(redact.ConnString(fromURL), redact.ConnString(toURL), r)
	if perr := a.emit(rep, func(t *tableWriter) { copyTable(t, &rep) }); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

// countEvents counts the source's events for the confirmation: from the
// catalog, which a SQL store answers from its index, else by reading the
// log.
func countEvents(ctx context.Context, s eventstore.Store) (int64, error) {
	var n int64
	if cat, ok := s.(storekit.Catalog); ok {
		for st, err := range cat.Streams(ctx, "", "") {
			if err != nil {
				return 0, err
			}
			n += int64(st.LastVersion) + 1
		}
		return n, nil
	}
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

func reportOf(from, to string, r storecopy.Report) copyReport {
	rep := copyReport{
		From: from, To: to, Checkpoint: r.Checkpoint, ResumedAfter: r.ResumedAfter, Last: r.Last,
		Copied: r.Copied, Duplicates: r.Duplicates, Appends: r.Appends,
		Consumers: r.Consumers, DeadLetters: r.DeadLetters, Snapshots: r.Snapshots,
		ElapsedSeconds: r.Elapsed.Seconds(),
	}
	if v := r.Verification; v != nil {
		rep.Verification = &copyVerification{Streams: v.Streams, Events: v.Events, Mismatches: []copyMismatch{}}
		for _, m := range v.Mismatches {
			rep.Verification.Mismatches = append(rep.Verification.Mismatches, copyMismatch{
				Stream: m.Stream, Version: m.Version, SourceEvents: m.SourceEvents, TargetEvents: m.TargetEvents,
				SourceDigest: hex.EncodeToString(m.SourceDigest[:]), TargetDigest: hex.EncodeToString(m.TargetDigest[:]),
			})
		}
	}
	return rep
}

func copyTable(t *tableWriter, r *copyReport) {
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	t.row("FROM", r.From)
	t.row("TO", r.To)
	t.row("CHECKPOINT", orDash(r.Checkpoint))
	t.row("RESUMED AFTER", position(r.ResumedAfter))
	t.row("LAST", position(r.Last))
	t.row("COPIED", i64(r.Copied))
	t.row("DUPLICATES", i64(r.Duplicates))
	t.row("APPENDS", i64(r.Appends))
	t.row("CONSUMERS", i64(r.Consumers))
	t.row("DEAD LETTERS", i64(r.DeadLetters))
	t.row("SNAPSHOTS", i64(r.Snapshots))
	t.row("ELAPSED", time.Duration(r.ElapsedSeconds*float64(time.Second)).Round(time.Millisecond).String())
	v := r.Verification
	if v == nil {
		t.row("VERIFIED", "no (--no-verify)")
		return
	}
	t.row("VERIFIED", fmt.Sprintf("%d streams, %d events, %d differ", v.Streams, v.Events, len(v.Mismatches)))
	for _, m := range v.Mismatches {
		t.row("MISMATCH", fmt.Sprintf("stream %q from version %d: %d events in the source, %d in the target",
			m.Stream, m.Version, m.SourceEvents, m.TargetEvents))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
