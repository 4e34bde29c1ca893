package saga_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/saga"
)

// Found by the widened simulation (internal/testrig/sim, the tabs workload), and
// by review: Redrive's set-back state must take every message once.

// testRedriveFromTheFirstStepTakesTheStartFirst: an instance started by a
// stored event, which then took a delivery, re-driven from its first step.
// Taken again in the drain's order, the delivery came first, found no
// started instance and was dropped. Promise (Runner.Redrive: the messages
// the steps from from on took in are taken again): the instance takes the
// message that starts it first, then the delivery, once each.
func testRedriveFromTheFirstStepTakesTheStartFirst(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	r := startedThenDelivered(t, g)

	redriven, err := r.Redrive(ctx, "1", 0)

	n := redriven.Messages
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	x := edgeExplain(t, r, "1")
	assert.Equal(t, []string{"start", "delivered"}, x.State.Seen, "the start first, then the delivery, once each")
	assert.True(t, x.Started)
}

// startedThenDelivered has a runner of g start instance 1 by a stored
// event and then take a delivery; it returns the runner.
func startedThenDelivered(t *testing.T, g *edgeRig) *saga.Runner[edgeState] {
	t.Helper()
	r := g.runner(t, nil, saga.RunnerOptions{})
	out, err := r.HandleStored(edgeContext(t), g.put(t, "src-1", edgeEvent{ID: "1", Text: "start"}))
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 0, edgeAny{ID: "1", Text: "delivered"}))
	return r
}

// testInterruptedRedriveGoesOnAtTheNextMessage: a Redrive from the first
// step whose step was stored but whose drain failed (the operator's
// process got an error back, or died), so the instance is set back to
// before its start, with the start waiting in its stream. The next
// delivery found no started instance and was dropped as ignored. Promise
// (Runner.Redrive: an interrupted Redrive goes on at the instance's next
// message): the instance takes its start first, then the redriven
// delivery, then the new one, once each.
func testInterruptedRedriveGoesOnAtTheNextMessage(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	production := startedThenDelivered(t, g)

	failing := newEdgeStore(g.store)
	operator := g.runner(t, failing, saga.RunnerOptions{})
	failing.failAppend(g.typ.Stream("1"), 1) // the Redrive's step is stored, the drain's first step is not
	_, err := operator.Redrive(ctx, "1", 0)
	require.Error(t, err)
	require.EqualValues(t, 1, failing.failures.Load(), "the drain's append failed")

	out := edgeDeliver(t, production, "feed", 1, edgeAny{ID: "1", Text: "next"})
	assert.NotEqual(t, saga.Ignored, out, "the next delivery after an interrupted Redrive")
	x := edgeExplain(t, production, "1")
	assert.Equal(t, []string{"start", "delivered", "next"}, x.State.Seen, "the start first, then the deliveries, once each")
	assert.True(t, x.Started)
}

// testRedriveThatSendsARejectedCommandAgainTakesItsRejection: a command
// sent by a step at or after from, rejected and compensated in the first
// history. The re-run sends it again under its ID; the bus answers with
// the rejection it recorded, and the re-driven history must take it: its
// compensation is part of the instance's new state. Found by the widened
// simulation (tabs seed 1199: "the rejected charge was compensated 0
// times").
func testRedriveThatSendsARejectedCommandAgainTakesItsRejection(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, rejections := rejectingRig(t, st, "reject-r", func(text string) bool { return text == "charge" })
	r := chargeRejected(t, g)

	_, err := r.Redrive(ctx, "1", 1) // from the step that sent the charge
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))

	assert.Equal(t, []string{"start", "charge", "rejected:c"}, edgeSeen(t, r, "1"),
		"the re-driven instance took the rejection of the command it sent again")
	assert.EqualValues(t, 2, rejections.Load(), "the rejection handler ran in the first history and in the re-driven one")
	assert.Zero(t, g.account(t, "reject-r").Charges["c"], "the rejected charge never applied")
}

// chargeRejected has a runner of g (a rejectingRig that charges on
// "charge") start instance 1 and charge, and its outbox take the charge's
// rejection; it returns the runner.
func chargeRejected(t *testing.T, g *edgeRig) *saga.Runner[edgeState] {
	t.Helper()
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "charge"})
	require.NoError(t, r.CatchUp(edgeContext(t)), "the outbox sends the charge, which is rejected and fed back")
	require.Equal(t, []string{"start", "charge", "rejected:c"}, edgeSeen(t, r, "1"))
	return r
}

// testRedriveByAnotherProcessSendsTheRejectedCommandAgain: the same as
// testRedriveThatSendsARejectedCommandAgainTakesItsRejection, with the
// Redrive made by an operator's process. Found by the widened simulation
// (tabs seeds 1199 and 1923): the production runner's outbox checked
// whether the re-sent command had settled on its cached view, from before
// the Redrive, where its rejection was taken; it skipped the command, and
// the re-driven history never took the rejection, nor ran its
// compensation.
func testRedriveByAnotherProcessSendsTheRejectedCommandAgain(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, rejections := rejectingRig(t, st, "reject-o", func(text string) bool { return text == "charge" })
	production := chargeRejected(t, g)

	last := edgeHistory(t, production, "1")
	operator := g.runner(t, nil, saga.RunnerOptions{NoCache: true})
	_, err := operator.Redrive(ctx, "1", 1)
	require.NoError(t, err)
	// Production's outbox sends the re-run's record, its cached view from
	// before the Redrive: the Redrive's own record went out through another
	// runner's outbox, as runners without leases share the records.
	for ev, err := range g.store.ReadStream(ctx, g.typ.Stream("1"), eventstore.Forward(last[len(last)-1].Version+2)) {
		require.NoError(t, err)
		require.NoError(t, production.SendStored(ctx, ev), "production sends record %d", ev.Version)
	}

	assert.Equal(t, []string{"start", "charge", "rejected:c"}, edgeSeen(t, operator, "1"),
		"the re-driven instance took the rejection of the command it sent again")
	assert.EqualValues(t, 2, rejections.Load(), "the rejection handler ran in the first history and in the re-driven one")
}

// testRedriveAcrossAnEarlierRedriveTakesEachMessageOnce: a Redrive from a
// step of the first history, before an earlier Redrive's step. Its base
// took a message that the earlier Redrive took again; taking it once more
// set the stream's progress back below what the base had taken, and the
// message was handled twice. Promise: each message once in the state.
func testRedriveAcrossAnEarlierRedriveTakesEachMessageOnce(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{})
	for _, text := range []string{"first", "second"} {
		out, err := r.HandleStored(ctx, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
		require.NoError(t, err)
		require.Equal(t, saga.Handled, out)
	}
	_, err := r.Redrive(ctx, "1", 1) // v2 redriven, v3 takes "second" again
	require.NoError(t, err)
	require.Equal(t, []string{"first", "second"}, edgeSeen(t, r, "1"))
	_, err = r.Redrive(ctx, "1", 2) // base v1 took "second"; v3 took it again
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "second"}, edgeSeen(t, r, "1"), "each message once")
}

// testDeadLettersAreHandedBackAfterARepair: an event whose instance cannot
// take it (a damaged record at the head of its stream) waits as a dead
// letter; handed back before the repair it stays, its attempts counted;
// handed back by an operator who read it before that, it is refused as
// changed; after the repair (the last good record appended again) it
// reaches its instance, once, and the dead letter is gone.
func testDeadLettersAreHandedBackAfterARepair(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
	edgeDeliver(t, r, "feed-d", 0, edgeEvent{ID: "d", Text: "start"})
	var good eventstore.Event
	for ev, err := range g.store.ReadStream(ctx, g.typ.Stream("d"), eventstore.Forward(0)) {
		require.NoError(t, err)
		good = ev
	}
	_, err := g.store.Append(trusted.Writer(ctx), good.StreamID, eventstore.Exact(good.Version),
		eventstore.EventData{Type: good.Type, SchemaVersion: good.SchemaVersion, Data: []byte(`{"handled":`)})
	require.NoError(t, err)
	g.put(t, "src-d", edgeEvent{ID: "d", Text: "after the damage"})
	require.NoError(t, r.CatchUp(ctx))

	letters := func() []eventstore.DeadLetter {
		var out []eventstore.DeadLetter
		for d, err := range r.DeadLetters(ctx) {
			require.NoError(t, err)
			out = append(out, d)
		}
		return out
	}
	seen := letters()
	require.Len(t, seen, 1)
	assert.Error(t, r.RetryDeadLetter(ctx, seen[0]), "the record is still damaged")
	again := letters()
	require.Len(t, again, 1)
	assert.Equal(t, seen[0].Attempts+1, again[0].Attempts, "the failed retry is counted")
	assert.ErrorIs(t, r.RetryDeadLetter(ctx, seen[0]), eventstore.ErrDeadLetterChanged, "an operator acts on what they read")

	_, err = g.store.Append(trusted.Writer(ctx), good.StreamID, eventstore.Exact(good.Version+1),
		eventstore.EventData{Type: good.Type, SchemaVersion: good.SchemaVersion, Data: good.Data})
	require.NoError(t, err, "the repair: the last good record again")
	require.NoError(t, r.RetryDeadLetter(ctx, again[0]))
	assert.Equal(t, []string{"start", "after the damage"}, edgeSeen(t, r, "d"))
	assert.Empty(t, letters())
	assert.ErrorIs(t, r.SkipDeadLetter(ctx, again[0]), eventstore.ErrDeadLetterChanged, "gone already")
}

// testRedriveFromBeforeAPoisonCommandTakesItBack: a step sent a command
// that its aggregate cannot carry out (its Handle panics), and the outbox
// parked the instance on it. The operator deploys a fixed handler and
// re-drives from that step; the re-run sends a command to another account
// instead. Found by the widened simulation (tabs seed 8097), whose check
// demanded that an operator skip such a command as well. Promise
// (Runner.Redrive: what the steps from from on recorded and the re-run
// does not record again is no longer the instance's to send): the instance
// is not parked, the poison command is never sent again, and the fixed
// one takes effect once.
func testRedriveFromBeforeAPoisonCommandTakesItBack(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	chargeTo := func(account string) edgeHooks {
		return edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			if e.Text == "charge" {
				out.Send(edgeCharge{Account: account, Ref: "c"})
			}
			return nil
		}}
	}
	g := newEdgeRig(t, st, chargeTo("panic-r"))
	r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "charge"})
	require.NoError(t, r.CatchUp(ctx))
	x := edgeExplain(t, r, "1")
	require.NotNil(t, x.Parked, "the outbox parked the instance on the poison command")
	require.NotEmpty(t, x.Parked.Command)

	fixed := g.sibling(t, chargeTo("acct-r"), false)
	operator := fixed.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
	_, err := operator.Redrive(ctx, "1", 1) // from the step that sent the poison command
	require.NoError(t, err)
	require.NoError(t, operator.CatchUp(ctx), "the outbox has nothing left that fails")
	require.NoError(t, operator.CatchUp(ctx))

	x = edgeExplain(t, operator, "1")
	assert.Nil(t, x.Parked, "the re-driven instance no longer holds the poison command")
	assert.Empty(t, x.Unsent)
	assert.Equal(t, []string{"start", "charge"}, x.State.Seen)
	assert.Equal(t, 1, fixed.account(t, "acct-r").Charges["c"], "the fixed command took effect once")
	assert.Zero(t, fixed.account(t, "panic-r").Charges["c"], "the poison command never applied")
}
