package saga_test

// Edges of the Redrive report (issue 23, item 14), found by review.

import (
	"context"
	"sync/atomic"
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

// testRedriveTellsWhichCommandsWentOutAnew: issue 23, item 14. A Redrive
// whose fixed handler changed a command (same type and aggregate, other
// content) returned only a count: the corrected command inherited the
// first run's ID, the bus absorbed it, and nothing told the operator that
// the correction never took effect. Promise: the Redrive's result, and
// Explain after it, list each command by ID as absorbed (the same as the
// first run's), changed (the first run's takes effect), sent anew, or
// dropped, with both versions; and the bus does what they say.
func testRedriveTellsWhichCommandsWentOutAnew(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	var fixed atomic.Bool
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		switch {
		case e.Text == "note":
			out.Send(edgeNotify{Account: "acct14", Ref: "noted"})
		case fixed.Load():
			out.Send(edgeCharge{Account: "acct14", Ref: "12.00"}) // the fix: the right amount
			out.Send(edgeNotify{Account: "acct99", Ref: "apology"})
		default:
			out.Send(edgeCharge{Account: "acct14", Ref: "10.00"})
			out.Send(edgeNotify{Account: "acct14", Ref: "receipt"})
		}
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "order"})
	edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "note"})
	require.NoError(t, r.CatchUp(ctx))
	first := edgeHistory(t, r, "1")
	require.Len(t, first, 2)
	charge, receipt, noted := first[0].Commands[0].ID, first[0].Commands[1].ID, first[1].Commands[0].ID

	fixed.Store(true)
	redriven, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	assert.Equal(t, 2, redriven.Messages)
	assert.EqualValues(t, 0, redriven.From)
	assert.EqualValues(t, 2, redriven.Step)
	fates := func(cmds []saga.RedrivenCommand) map[string]saga.CommandFate {
		out := make(map[string]saga.CommandFate)
		for _, c := range cmds {
			out[c.ID] = c.Fate
		}
		return out
	}
	require.Len(t, redriven.Commands, 4)
	assert.Equal(t, []string{charge, receipt, noted}, []string{redriven.Commands[0].ID, redriven.Commands[1].ID, redriven.Commands[2].ID},
		"the first run's commands in their order, then the new one")
	apology := redriven.Commands[3].ID
	assert.Equal(t, map[string]saga.CommandFate{charge: saga.CommandChanged, receipt: saga.CommandDropped,
		noted: saga.CommandAbsorbed, apology: saga.CommandSentAnew}, fates(redriven.Commands))
	changed := redriven.Commands[0]
	require.NotNil(t, changed.First)
	require.NotNil(t, changed.Now)
	assert.Equal(t, edgeCharge{Account: "acct14", Ref: "10.00"}, changed.First.Command)
	assert.Equal(t, edgeCharge{Account: "acct14", Ref: "12.00"}, changed.Now.Command)
	assert.Nil(t, redriven.Commands[1].Now)
	assert.Nil(t, redriven.Commands[3].First)

	x := edgeExplain(t, r, "1")
	require.NotNil(t, x.Redrive, "Explain keeps the latest Redrive")
	assert.Equal(t, redriven, *x.Redrive)

	require.NoError(t, r.CatchUp(ctx))
	acct := g.account(t, "acct14")
	assert.Equal(t, 1, acct.Charges["10.00"], "the changed command: the first run's took effect")
	assert.Zero(t, acct.Charges["12.00"], "the changed command: the correction was absorbed, as its fate says")
	assert.Equal(t, 1, acct.Notices["receipt"], "dropped, not undone")
	assert.Equal(t, 1, acct.Notices["noted"], "absorbed")
	assert.Equal(t, 1, g.account(t, "acct99").Notices["apology"], "sent anew")

	// A later message is no part of the re-run.
	edgeDeliver(t, r, "src-1", 2, edgeEvent{ID: "1", Text: "note"})
	require.NoError(t, r.CatchUp(ctx))
	assert.Equal(t, fates(redriven.Commands), fates(edgeExplain(t, r, "1").Redrive.Commands))
}
