package saga_test

// Adversarial review of the saga rewrite (issue 20): rejections, their
// per-command deduplication (the 256-entry settled list and its history
// horizon), and completion. The rig is edges_lost_test.go's.

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// TestReviewRedriveKeepsARejectionBelowTheSettledHorizon: edge 4 again,
// once the instance has settled more than 256 commands. A command sent at
// step 0 is rejected at step v, after 257 other rejections raised the
// settled list's horizon above step 0. Redrive from v sets the instance back
// to step v-1 and holds the rejection again; the drain asks whether the
// command settled, the list forgot (the horizon), and the lookup in the
// history finds the first run's rejection step at v, which the Redrive has
// undone: the re-held rejection is dropped as a duplicate and the
// compensation is lost from the re-driven history. Promise (Runner.Redrive:
// "the rejections and failures of commands sent before from are held
// again, so that none is lost"). The cause: saga/settled.go
// engine.isSettled reads the history from the sending record to the end
// and takes any rejection step as proof, including the steps a later
// "redriven" record set back.
func TestReviewRedriveKeepsARejectionBelowTheSettledHorizon(t *testing.T) {
	ctx := edgeContext(t)
	const many = 257
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		switch e.Text {
		case "start":
			out.Send(edgeCharge{Account: "t", Ref: "target"})
		case "many":
			for i := range many {
				out.Send(edgeCharge{Account: "a" + strconv.Itoa(i), Ref: "m" + strconv.Itoa(i)})
			}
		}
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "start"})
	edgeDeliver(t, r, "s", 1, edgeEvent{ID: "1", Text: "many"})
	ids := map[string]string{}
	for _, s := range edgeHistory(t, r, "1") {
		for _, c := range s.Commands {
			ids[c.Command.(edgeCharge).Ref] = c.ID
		}
	}
	require.Len(t, ids, many+1)
	for i := range many {
		out, err := r.Reject(ctx, "1", ids["m"+strconv.Itoa(i)], errors.New("declined"))
		require.NoError(t, err)
		require.Equal(t, saga.Handled, out)
	}
	out, err := r.Reject(ctx, "1", ids["target"], errors.New("declined"))
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out, "the target's rejection is handled in the first run")
	x := edgeExplain(t, r, "1")
	require.Equal(t, 1, edgeCount(x.State.Seen, "rejected:target"))
	from := x.Version // the rejection's step

	redriven, err := r.Redrive(ctx, "1", from)

	n := redriven.Messages
	require.NoError(t, err)
	require.Equal(t, 1, n, "the rejection of a command sent before from is taken again")
	x = edgeExplain(t, r, "1")
	assert.Empty(t, x.Held, "the drain took the re-held rejection")
	assert.Equal(t, 1, edgeCount(x.State.Seen, "rejected:target"),
		"the re-driven history took the rejection again (last step: %s); its compensation is not lost", x.LastStep.Kind)
}

// TestReviewCompletedInstanceTakesNoDeadline: a step sends a charge and
// completes the instance; the charge is rejected, and the rejection
// handler (which still runs, as Output.Complete promises) schedules a
// follow-up deadline. The completed instance then keeps that deadline
// pending, and it fires: a deadline handler runs on an ended instance.
// Promise (saga/record.go record.Completed: "the instance has ended ... it
// takes no more events or deadlines, only the outcomes of the commands
// that step (or a later one) sent"; Output.Complete: "its pending deadlines
// are dropped"). The cause: saga/handle.go engine.run applies the
// handler's timings (engine.timings) whatever r.Completed says, and
// saga/decide.go fires any deadline it finds in r.Deadlines, completed or
// not. Either refuse or drop deadline operations on a completed instance,
// or document that its rejection handlers may set deadlines that fire.
func TestReviewCompletedInstanceTakesNoDeadline(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.Send(edgeCharge{Account: "reject-g", Ref: "final"})
			out.Complete()
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, out *saga.Output) error {
			s.Seen = append(s.Seen, "rejected:"+ref)
			out.ScheduleAfter("due", time.Minute, edgeDue{Text: "after completion"})
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "finish"})
	require.NoError(t, r.CatchUp(ctx))
	x := edgeExplain(t, r, "1")
	require.True(t, x.Completed)
	require.Equal(t, []string{"finish", "rejected:final"}, x.State.Seen, "the compensation ran on the completed instance")
	assert.Empty(t, x.Deadlines, "a completed instance has no pending deadline")

	g.clock.Advance(2 * time.Minute)
	require.NoError(t, r.CatchUp(ctx))
	assert.Equal(t, []string{"finish", "rejected:final"}, edgeSeen(t, r, "1"), "no deadline reaches a completed instance")
}
