package saga_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Edges of the deadline clock outside the trodden Run (issue 23, items 7
// and 8): a clock that only tells the time, events from a broker, and a
// process that fires deadlines itself.

// nowOnly is a clock that tells the time and cannot wake anyone.
type nowOnly struct{ c *sagatest.Clock }

func (n nowOnly) Now() time.Time { return n.c.Now() }

// testRunFiresDeadlinesOnAClockThatOnlyTellsTheTime: issue 23, item 8.
// saga.Clock required After although only Run waits on the clock, so a
// user with a clock of their own (Now alone, enough for Deliver and
// FireDue) had to write one. Promise: a Clock is Now alone; Run looks at
// one that is not a Waker again every PollInterval, and fires what falls
// due on it.
func testRunFiresDeadlinesOnAClockThatOnlyTellsTheTime(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.ScheduleAfter("due", time.Hour, edgeDue{Text: "an hour later"})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{Clock: nowOnly{g.clock}})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(run) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	g.clock.Advance(time.Hour)
	require.Eventually(t, func() bool { return slices.Contains(edgeSeen(t, r, "1"), "due:an hour later") },
		10*saga.PollInterval, 10*time.Millisecond, "the deadline fires once its time has come on the clock")
}

// testExternalEventsRunTheOutboxAndTheDeadlinesOnly: issue 23, item 7. A
// saga fed from a broker needed the outbox and the deadline clock, which
// ran only inside Run and CatchUp, with the store subscription. Promise:
// with RunnerOptions.ExternalEvents, Run sends the commands and fires the
// deadlines of what Deliver brought, and takes no event from the store.
func testExternalEventsRunTheOutboxAndTheDeadlinesOnly(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeNotify{Account: "acct-" + e.ID, Ref: "hello"})
		out.ScheduleAfter("due", time.Hour, edgeDue{Text: "an hour later"})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{ExternalEvents: true})
	g.put(t, "feed-2", edgeEvent{ID: "2", Text: "stored"}) // the store's, not the broker's
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(run) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	edgeDeliver(t, r, "broker", 0, edgeEvent{ID: "1", Text: "delivered"})
	require.Eventually(t, func() bool { return g.account(t, "acct-1").Notices["hello"] == 1 },
		10*time.Second, 5*time.Millisecond, "the outbox sends the command")
	g.clock.Advance(time.Hour)
	require.Eventually(t, func() bool { return slices.Contains(edgeSeen(t, r, "1"), "due:an hour later") },
		10*time.Second, 5*time.Millisecond, "the deadline fires")
	assert.False(t, edgeExplain(t, r, "2").Exists, "no event is taken from the store")
	assert.Zero(t, g.account(t, "acct-2").Notices["hello"])
}

// restartWithPendingDeadlines stores n instances, each with a deadline due
// in an hour, and returns a new process of the same code on the same
// store, with opts, that has loaded nothing: a restart.
func restartWithPendingDeadlines(t *testing.T, st edgeStores, n int, opts saga.RunnerOptions) (*edgeRig, *saga.Runner[edgeState]) {
	t.Helper()
	hooks := edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.ScheduleAfter("due", time.Hour, edgeDue{Text: e.Text})
		return nil
	}}
	g := newEdgeRig(t, st, hooks)
	before := g.runner(t, nil, saga.RunnerOptions{})
	for i := range n {
		edgeDeliver(t, before, fmt.Sprint("broker-", i), 0, edgeEvent{ID: fmt.Sprint(i), Text: "start"})
	}
	return g, g.sibling(t, hooks, false).runner(t, nil, opts)
}

// testFireDueAfterARestartNeedsNoLoad: issue 23, item 7. A process that
// fired deadlines with FireDue and forgot LoadDeadlines lost every
// deadline pending at its restart (measured: 141 of 197). Promise: the
// first FireDue loads them.
func testFireDueAfterARestartNeedsNoLoad(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, restarted := restartWithPendingDeadlines(t, st, 5, saga.RunnerOptions{})
	g.clock.Advance(time.Hour)
	fired, err := restarted.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, fired, "every deadline pending at the restart fires")
}

// testFireDueAfterAFailedCatchUpLoadsTheDeadlines: found by review of
// item 7. A CatchUp that failed before its outbox read the deadlines
// marked the runner as one whose consumers load them, so every later
// FireDue skipped the load and the deadlines pending at the restart never
// fired. Promise: FireDue loads what no one has.
func testFireDueAfterAFailedCatchUpLoadsTheDeadlines(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, restarted := restartWithPendingDeadlines(t, st, 3, saga.RunnerOptions{ExternalEvents: true})
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, restarted.CatchUp(gone))
	g.clock.Advance(time.Hour)
	fired, err := restarted.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, fired, "the deadlines pending at the restart fire")
}
