package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// The acting commands keep the runner's conditional promise: each shows
// what it acts on, as explain sees it now, and names it to the runner
// (the parked message's ID, the gap's sequence), so that an instance that
// moved on meanwhile is refused (a stale action, exit 1) rather than acted
// on unseen.

// sagaActed is what retry, skip and release did, in --json.
type sagaActed struct {
	Saga     string `json:"saga"`
	Instance string `json:"instance"`
	Action   string `json:"action"`
	// Message names what the action named: a message ID, or a gap as
	// source#waits-for.
	Message string `json:"message"`
	// Outcome is retry's: "handled" when the handler ran, "parked" when
	// it failed again.
	Outcome string `json:"outcome,omitempty"`
	// After is the instance after the action.
	After sagaExplanation `json:"after"`
}

// stale is the error of an action on what the instance no longer has:
// it says what is there now, so that the operator can look again.
func stale(ctx context.Context, s SagaRunner, id string, cause error) error {
	x, err := s.explain(ctx, id)
	if err != nil {
		return fmt.Errorf("%w; nothing was changed", cause)
	}
	return fmt.Errorf("%w; nothing was changed; the instance now: %s", cause, nowLine(x))
}

// nowLine says in a line what an instance is parked on and holds.
func nowLine(x sagaExplanation) string {
	s := fmt.Sprintf("version %d", x.Version)
	if x.Parked != nil {
		s += ", parked on " + x.Parked.ID
	} else {
		s += ", nothing parked"
	}
	gaps := 0
	for _, h := range x.Held {
		if h.Behind == "gap" {
			gaps++
		}
	}
	return s + fmt.Sprintf(", %d held message(s), %d behind a gap", len(x.Held), gaps)
}

// notParked is the stale error of a retry or skip whose message is not
// the one parked (as saga.StaleError words it, so that both read alike).
func notParked(s SagaRunner, x sagaExplanation, action, messageID string) error {
	now := ""
	if x.Parked != nil {
		now = x.Parked.ID
	}
	return &saga.StaleError{Saga: s.sagaName(), Instance: x.Instance, Action: action, Want: messageID, Now: now}
}

func (a *app) sagasRetry() *cobra.Command {
	return a.parkedAction("retry", "Run a parked message again, after its cause was fixed",
		`Run the message an instance is parked on again, through the service's code
(deploy the fix first). When it succeeds, the messages held behind it follow in
order; when it fails again the instance stays parked, its attempts counted.
Name the message by the ID that explain or parked shows: the retry acts only
while that message is the one parked.`)
}

func (a *app) sagasSkip() *cobra.Command {
	return a.parkedAction("skip", "Drop a parked message without handling it",
		`Drop the message an instance is parked on, without handling it: the instance
goes on after it with the messages held behind it. A skipped deadline never
fires, a skipped rejection never reaches its handler, a skipped command is never
sent. Name the message by the ID that explain or parked shows: the skip acts
only while that message is the one parked.`)
}

// parkedAction makes retry or skip, which differ in what they do.
func (a *app) parkedAction(action, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " <type> <instance> <message-id>",
		Short: short,
		Long:  long,
		Args:  args(3, "type", "instance", "message-id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			s, err := a.sagaNamed(ctx, "sagas "+action, argv[0])
			if err != nil {
				return err
			}
			id, msg := argv[1], argv[2]
			x, err := s.explain(ctx, id)
			if err != nil {
				return err
			}
			if x.Parked == nil || x.Parked.ID != msg {
				return stale(ctx, s, id, notParked(s, x, action, msg))
			}
			verb := "retry"
			if action == "skip" {
				verb = "skip (drop without handling)"
			}
			if err := a.confirm(fmt.Sprintf("%s %s of saga %s instance %s: %s; the %d held message(s) follow",
				verb, msg, s.sagaName(), id, parkedLine(*x.Parked), len(x.Held))); err != nil {
				return err
			}
			done := sagaActed{Saga: s.sagaName(), Instance: id, Action: action, Message: msg}
			if action == "skip" {
				err = s.skip(ctx, id, msg)
			} else {
				done.Outcome, err = s.retry(ctx, id, msg)
			}
			if errors.Is(err, saga.ErrStale) {
				return stale(ctx, s, id, err)
			}
			if err != nil {
				return err
			}
			return a.acted(ctx, s, done)
		},
	}
}

// acted explains the instance after an action and prints what it did.
func (a *app) acted(ctx context.Context, s SagaRunner, done sagaActed) error {
	after, err := s.explain(ctx, done.Instance)
	if err != nil {
		return fmt.Errorf("%s done, but explaining the instance after it: %w", done.Action, err)
	}
	done.After = after
	return a.emit(done, func(t *tableWriter) {
		what := done.Action + " " + done.Message + ": done"
		if done.Outcome != "" {
			what += " (" + done.Outcome + ")"
		}
		t.line("%s", what)
		t.line("the instance now: %s", nowLine(after))
		if after.Parked != nil {
			t.line("parked: %s", parkedLine(*after.Parked))
		}
	})
}

func (a *app) sagasRelease() *cobra.Command {
	return &cobra.Command{
		Use:   "release <type> <instance> <source> <waits-for>",
		Short: "Give up waiting for a gap that will never fill",
		Long: `Give up waiting for the missing message of source that an instance's held
deliveries wait for, at the sequence waits-for (as gaps or explain shows it):
the lowest held message becomes the next one, and the instance goes on from
there; the missing message, should it come later, is a duplicate. The release
acts only while the gap still waits for that sequence.`,
		Args: args(4, "type", "instance", "source", "waits-for"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			id, source := argv[1], argv[2]
			waitsFor, err := strconv.ParseUint(argv[3], 10, 64)
			if err != nil {
				return usagef("waits-for %q: a sequence (0, 1, 2, ...), as sagas gaps shows it", argv[3])
			}
			s, err := a.sagaNamed(ctx, "sagas release", argv[0])
			if err != nil {
				return err
			}
			x, err := s.explain(ctx, id)
			if err != nil {
				return err
			}
			gap := fmt.Sprintf("%s#%d", source, waitsFor)
			held, lowest, now := 0, uint64(0), ""
			for _, h := range x.Held {
				if h.Source != source || h.Behind != "gap" {
					continue
				}
				if held == 0 || h.Sequence < lowest {
					lowest = h.Sequence
				}
				held++
				now = fmt.Sprintf("%s#%d", source, h.WaitsFor)
			}
			if now != gap {
				return stale(ctx, s, id, &saga.StaleError{Saga: s.sagaName(), Instance: id, Action: "release", Want: gap, Now: now})
			}
			if err := a.confirm(fmt.Sprintf("release the gap of saga %s instance %s in source %s: give up waiting for #%d; held #%d becomes the next, and the %d held message(s) of %s follow",
				s.sagaName(), id, source, waitsFor, lowest, held, source)); err != nil {
				return err
			}
			err = s.release(ctx, id, source, waitsFor)
			if errors.Is(err, saga.ErrStale) {
				return stale(ctx, s, id, err)
			}
			if err != nil {
				return asUsage(err)
			}
			return a.acted(ctx, s, sagaActed{Saga: s.sagaName(), Instance: id, Action: "release", Message: gap})
		},
	}
}

// asUsage makes the runner's refusal of an argument (a step past the
// latest, a source with nothing to release) a usage error: the command
// line named something the instance does not have.
func asUsage(err error) error {
	var bad *eventstore.InvalidArgumentError
	if errors.As(err, &bad) {
		return &UsageError{Msg: "the saga refused the arguments", Err: err}
	}
	return err
}

func (a *app) sagasRedrive() *cobra.Command {
	var from uint64
	c := &cobra.Command{
		Use:   "redrive <type> <instance> --from STEP",
		Short: "Run an instance's messages again from a step, through the fixed code",
		Long: `Set an instance back to what the step before --from left it, and run the
messages its steps from --from on took again, through the service's code as it
is now: after a handler that decided wrong has been fixed. Commands keep their
IDs, so the bus absorbs those the first run sent; the command prints each
command's fate: absorbed (sent again as before), changed (sent again
differently: the first run's takes effect), new (only the re-run sends it) or
dropped (only the first run sent it; not undone).`,
		Args: args(2, "type", "instance"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ctx := cmd.Context()
			if !cmd.Flags().Changed("from") {
				return usagef("sagas redrive needs --from STEP: the version of the first step to run again (explain shows the latest)")
			}
			s, err := a.sagaNamed(ctx, "sagas redrive", argv[0])
			if err != nil {
				return err
			}
			id := argv[1]
			x, err := s.explain(ctx, id)
			if err != nil {
				return err
			}
			if from > x.Version {
				return usagef("--from %d: instance %s's latest step is %d", from, id, x.Version)
			}
			if err := a.confirm(fmt.Sprintf("redrive saga %s instance %s from step %d (latest %d): set it back to what step %d left and run the messages of steps %d to %d again through this code; commands keep their IDs",
				s.sagaName(), id, from, x.Version, int64(from)-1, from, x.Version)); err != nil {
				return err
			}
			r, err := s.redrive(ctx, id, from)
			if err != nil {
				return asUsage(err)
			}
			return a.emit(r, func(t *tableWriter) {
				t.line("redriven: step %d sets the instance back; %d message(s) run again from step %d", r.Step, r.Messages, r.From)
				redriveRows(t, r)
			})
		},
	}
	c.Flags().Uint64Var(&from, "from", 0, "the version of the first step to run again")
	return c
}
