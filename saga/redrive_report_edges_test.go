package saga_test

// Edges of the Redrive report (issue 23, item 14), found by review.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

func fatesByRef(cmds []saga.RedrivenCommand) map[string]saga.CommandFate {
	out := make(map[string]saga.CommandFate)
	for _, c := range cmds {
		ref := ""
		for _, sc := range []*saga.SentCommand{c.First, c.Now} {
			if sc != nil {
				if n, ok := sc.Command.(edgeNotify); ok {
					ref = n.Ref
				}
			}
		}
		out[ref] = c.Fate
	}
	return out
}

// testRedriveReportsTheRetakenRejectionsCommands: found by review of item
// 14. The compensation that a rejection's handler sends again in the
// re-run (under the first run's ID: absorbed) was reported as dropped.
func testRedriveReportsTheRetakenRejectionsCommands(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.Send(edgeNotify{Account: "reject-1", Ref: "ask"})
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, out *saga.Output) error {
			s.Seen = append(s.Seen, "rejected:"+ref)
			out.Send(edgeNotify{Account: "acct-c", Ref: "compensate"})
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, r.CatchUp(ctx))
	require.Equal(t, []string{"order", "rejected:ask"}, edgeSeen(t, r, "1"))

	_, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))
	require.Equal(t, []string{"order", "rejected:ask"}, edgeSeen(t, r, "1"), "the re-run took the rejection again")
	var again int
	for _, s := range edgeHistory(t, r, "1") {
		for _, c := range s.Commands {
			if c.Command.(edgeNotify).Ref == "compensate" && s.Version > 2 {
				again++
			}
		}
	}
	require.Equal(t, 1, again, "the re-run's rejection step sent the compensation again")

	x := edgeExplain(t, r, "1")
	require.NotNil(t, x.Redrive)
	assert.Equal(t, map[string]saga.CommandFate{"ask": saga.CommandAbsorbed, "compensate": saga.CommandAbsorbed}, fatesByRef(x.Redrive.Commands))
}

// testALaterDeadlineIsNoPartOfTheReRun: found by review of item 14. A
// deadline the first run scheduled but never fired, re-armed by the
// re-run, fires an hour after the Redrive: a later message, yet the report
// counted its command as one "only the re-run sends".
func testALaterDeadlineIsNoPartOfTheReRun(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.ScheduleAfter("due", time.Hour, edgeDue{Text: "x"})
			return nil
		},
		deadline: func(_ context.Context, _ string, s *edgeState, _ edgeDue, out *saga.Output) error {
			s.Seen = append(s.Seen, "due")
			out.Send(edgeNotify{Account: "acct-d", Ref: "reminder"})
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, r.CatchUp(ctx))
	redriven, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	assert.Empty(t, redriven.Commands)

	g.clock.Advance(2 * time.Hour)
	require.NoError(t, r.CatchUp(ctx))
	require.Equal(t, []string{"order", "due"}, edgeSeen(t, r, "1"))
	x := edgeExplain(t, r, "1")
	assert.Equal(t, redriven, *x.Redrive, "the deadline that fired an hour later is no part of the re-run")
}

// testARedriveThatSucceededReturnsNoError: found by review of item 14.
// The first run sent a command whose type this code no longer decodes:
// the Redrive was stored and its re-run done, yet Redrive returned an
// error, so the operator, told it failed, would re-drive again.
func testARedriveThatSucceededReturnsNoError(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeCharge{Account: "acct1", Ref: "10.00"})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, r.CatchUp(ctx))

	// The fixed code removed the charges: it cannot decode the charge, and
	// Explain says so and fills in the rest.
	fixed := g.sibling(t, edgeHooks{}, true).runner(t, nil, saga.RunnerOptions{})
	x, _ := fixed.Explain(ctx, "1")
	before := x.Version
	redriven, err := fixed.Redrive(ctx, "1", 0)
	require.NoError(t, err, "a Redrive that was done reports no failure")
	x, _ = fixed.Explain(ctx, "1")
	require.Greater(t, x.Version, before, "the Redrive was stored and re-run")
	require.Len(t, redriven.Commands, 1)
	assert.Nil(t, redriven.Commands[0].First.Command, "the command this code cannot decode shows without its value")
}
