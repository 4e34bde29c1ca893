package saga_test

// Regression tests for the edges of issue 20 where an effect happened
// twice, or a deadline fired after it was cancelled (cases 8-10). The set-up
// is in edges_lost_test.go.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// testEdge08RedriveWithAnAddedCommandAppliesEachCommandOnce: case 8.
// Redrive gave commands IDs by their index in the step: when the fixed
// handler sends a new command first, the old command got a new ID and was
// applied twice (a charge made twice), and the new one inherited the old
// ID, so the bus answered it as a duplicate and it never applied. Promise
// (Runner.Redrive: "Commands keep their IDs ... the bus absorbs a command
// the first run already carried out"; DESIGN "Identity from meaning, not
// position"): after the re-drive, each command has applied exactly once.
func testEdge08RedriveWithAnAddedCommandAppliesEachCommandOnce(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	var fixed atomic.Bool
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		if fixed.Load() {
			out.Send(edgeNotify{Account: "acct8", Ref: "receipt"}) // the fix: a receipt first
		}
		out.Send(edgeCharge{Account: "acct8", Ref: "charge"})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, r.CatchUp(ctx))
	require.Equal(t, 1, g.account(t, "acct8").Charges["charge"], "the first run charged once")

	fixed.Store(true)
	redriven, err := r.Redrive(ctx, "1", 0)
	n := redriven.Messages
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, r.CatchUp(ctx))

	acct := g.account(t, "acct8")
	assert.Equal(t, 1, acct.Charges["charge"], "the charge the first run made is absorbed, not made again")
	assert.Equal(t, 1, acct.Notices["receipt"], "the command the fixed handler added is applied, not answered as a duplicate")
}

// testEdge09CancelAfterScheduleInOneStepIsNotLost: case 9. A handler that
// schedules a deadline and then cancels it, in one step, left it pending:
// the cancellation was applied before the scheduling, and the deadline
// fired after it was cancelled. Promise (Output.Cancel: "it never reaches
// its handler"; DESIGN "a cancelled deadline never reaches its handler";
// Output: what a handler decides, in order): nothing fires.
func testEdge09CancelAfterScheduleInOneStepIsNotLost(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.ScheduleAfter("due", time.Minute, edgeDue{Text: "x"})
		out.Cancel("due")
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "schedule then cancel"})
	assert.Empty(t, edgeExplain(t, r, "1").Deadlines, "the deadline was cancelled after it was scheduled")

	g.clock.Advance(2 * time.Minute)
	fired, err := r.FireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, fired, "a cancelled deadline never fires")
	assert.Equal(t, []string{"schedule then cancel"}, edgeSeen(t, r, "1"))
}

// testEdge10InvalidUTF8SourceIsNotHandledTwice: case 10. A delivery
// source that is not valid UTF-8 was stored under another key (the JSON
// record replaced its bytes), so after a reload every redelivery was
// handled again. Promise (docs/sagas.md "Watermarks per source": a message
// at or below its source's last handled sequence is a duplicate; Deliver
// refuses a source it cannot take with a typed error): a redelivery does
// not change the state again, whether Deliver took the source or refused it.
func testEdge10InvalidUTF8SourceIsNotHandledTwice(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	const source = "\xffbroker"
	d := saga.Delivery{Source: source, Sequence: 0, Event: edgeEvent{ID: "1", Text: "once"}}
	out1, err1 := g.runner(t, nil, saga.RunnerOptions{NoCache: true}).Deliver(ctx, d)
	// A fresh runner (another process, or this one after a restart) gets
	// the redelivery.
	r := g.runner(t, nil, saga.RunnerOptions{NoCache: true})
	out2, err2 := r.Deliver(ctx, d)
	t.Logf("first delivery: %s, %v; redelivery: %s, %v", out1, err1, out2, err2)

	seen := edgeSeen(t, r, "1")
	assert.LessOrEqual(t, edgeCount(seen, "once"), 1, "the message was handled twice: %v", seen)
	if err1 == nil && out1 == saga.Handled {
		assert.Equal(t, 1, edgeCount(seen, "once"))
		assert.NotEqual(t, saga.Handled, out2, "the redelivery is not handled again")
	}
}
