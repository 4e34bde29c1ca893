package saga_test

// Regression tests for the sixteen edges of issue 20: each one asserts a
// promise of docs/sagas.md or DESIGN.md ("Sagas"), and failed on f0eeaa3.
// This file holds the cases of lost effects (1-7); the set-up that the
// edge tests share is in edges_rig_test.go.

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// testEdge01AnyOrderMessageDoesNotDropEarlierOnes: case 1. A message of a
// type mapped with AnyOrder moved its source's watermark to its own
// sequence, so the earlier messages of that source, arriving later, were
// dropped as duplicates. Promise (saga.Event.AnyOrder, DESIGN "One
// structure, one job"): an any-order message is handled when it arrives,
// and it drops nothing that was not handled; every message is handled once.
func testEdge01AnyOrderMessageDoesNotDropEarlierOnes(t *testing.T, st edgeStores) {
	g := newEdgeRig(t, st, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{})
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "start", 0, edgeEvent{ID: "1", Text: "start"}))

	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 2, edgeAny{ID: "1", Text: "any#2"}), "an any-order message is handled at once")
	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 0, edgeEvent{ID: "1", Text: "ordered#0"}),
		"#0 of the source was never handled: it is not a duplicate of the any-order #2")
	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 1, edgeAny{ID: "1", Text: "any#1"}),
		"#1 of the source was never handled: it is not a duplicate of #2")

	seen := edgeSeen(t, r, "1")
	assert.ElementsMatch(t, []string{"start", "any#2", "ordered#0", "any#1"}, seen, "every message of the source handled once")
	for seq, ev := range []any{edgeEvent{ID: "1", Text: "ordered#0"}, edgeAny{ID: "1", Text: "any#1"}, edgeAny{ID: "1", Text: "any#2"}} {
		assert.Equal(t, saga.Duplicate, edgeDeliver(t, r, "feed", uint64(seq), ev), "a redelivery of #%d", seq)
	}
	assert.Len(t, edgeSeen(t, r, "1"), len(seen), "redeliveries change nothing")
}

// testEdge02DeadlineSetBehindAnotherRunnersCheckpointFires: case 2. Two
// runners without leases share their checkpoints: runner A's outbox moved
// the shared checkpoint past a record that set a deadline; runner B, whose
// deadline index was loaded before, started its outbox session after that
// record and never learnt the deadline, so once A stopped it never fired.
// Promise (docs/sagas.md "Without Exclusive every runner runs every
// segment ... it costs work, never correctness"; DESIGN: deadlines are
// durable and fire exactly once): B fires the deadline when it is due.
func testEdge02DeadlineSetBehindAnotherRunnersCheckpointFires(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.ScheduleAfter("due", 15*time.Minute, edgeDue{Text: e.ID})
		return nil
	}})
	a := g.runner(t, nil, saga.RunnerOptions{})
	b := g.runner(t, nil, saga.RunnerOptions{})
	require.NoError(t, b.CatchUp(ctx), "B starts first: its deadlines are loaded, from an empty store")

	g.put(t, "src-1", edgeEvent{ID: "1", Text: "schedule"})
	require.NoError(t, a.CatchUp(ctx), "A steps the instance, and its outbox moves the shared checkpoint past the step")
	require.Len(t, edgeExplain(t, a, "1").Deadlines, 1, "the deadline is pending")

	// A stops; B goes on alone.
	require.NoError(t, b.CatchUp(ctx))
	g.clock.Advance(16 * time.Minute)
	require.NoError(t, b.CatchUp(ctx))
	fired, err := b.FireDue(ctx)
	require.NoError(t, err)
	t.Logf("B fired %d more after its catch-up", fired)
	x := edgeExplain(t, b, "1")
	assert.Equal(t, []string{"schedule", "due:1"}, x.State.Seen, "the deadline fired, once, though A's outbox passed its record")
	assert.Empty(t, x.Deadlines, "and is no longer pending")
}

// testEdge03HeldEventSurvivesAnInterruptedDrainAfterSkip: case 3. A stored
// event held behind a parked one was dropped as a duplicate when the
// stream's next event was stepped before the drain that follows Skip had
// handled it (here the drain's append failed once, as after a crash or a
// lost connection). Promise (DESIGN "Operator actions ... whatever they
// unblock is crash-safe (a later event of a stream never overtakes a held
// one)"; HandleStored: each event of a stream, in order, at least once):
// the held event is handled, once, before the stream's later one.
func testEdge03HeldEventSurvivesAnInterruptedDrainAfterSkip(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	store := newEdgeStore(g.store)
	r := g.runner(t, store, saga.RunnerOptions{})
	var evs []eventstore.Event
	for _, text := range []string{"start", "poison", "held", "next"} {
		evs = append(evs, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
	}
	for i, want := range []saga.Outcome{saga.Handled, saga.Parked, saga.Held} {
		out, err := r.HandleStored(ctx, evs[i])
		require.NoError(t, err)
		require.Equal(t, want, out, "event #%d", i)
	}

	// The operator skips the poison: the skip's step is stored, and the
	// drain's step of the held event then fails to append.
	store.failAppend(g.typ.Stream("1"), 1)
	err := r.Skip(ctx, "1", edgeExplain(t, r, "1").Parked.ID)
	require.EqualValues(t, 1, store.failures.Load(), "the drain's append failed")
	t.Logf("Skip: %v", err)

	// The stream's next event arrives before anything drains the instance.
	out, err := r.HandleStored(ctx, evs[3])
	require.NoError(t, err)
	t.Logf("the next event: %s", out)

	seen := edgeSeen(t, r, "1")
	assert.Equal(t, 1, edgeCount(seen, "held"), "the held event was handled once, not dropped as a duplicate: %v", seen)
	assert.Equal(t, 1, edgeCount(seen, "next"), "the next event was handled once: %v", seen)
	if i, j := slices.Index(seen, "held"), slices.Index(seen, "next"); i >= 0 && j >= 0 {
		assert.Less(t, i, j, "the stream's later event does not overtake the held one")
	}
	assert.Empty(t, edgeExplain(t, r, "1").Held)
}

// testEdge03DrainResumesAfterTheOperatorsProcessStops: the other half of
// case 3. An operator's Skip is stored and the drain that follows it fails
// (the operator's process dies, say), and no later event of the instance
// ever arrives to drain it. Promise (DESIGN "whatever they unblock is
// crash-safe"): the outbox of the production runner, reading the skip's
// record, drains the instance: the held events are handled, once each, in
// their stream's order.
func testEdge03DrainResumesAfterTheOperatorsProcessStops(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	production := g.runner(t, nil, saga.RunnerOptions{})
	var evs []eventstore.Event
	for _, text := range []string{"start", "poison", "held-1", "held-2"} {
		evs = append(evs, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
	}
	require.NoError(t, production.CatchUp(ctx))
	x := edgeExplain(t, production, "1")
	require.NotNil(t, x.Parked)
	require.Equal(t, map[string]uint64{"src-1": 1}, x.Pending, "the held events wait in their stream")
	for _, ev := range evs[2:] {
		out, err := production.HandleStored(ctx, ev)
		require.NoError(t, err)
		assert.Equal(t, saga.Duplicate, out, "a held event delivered again waits already: nothing is stored")
	}
	assert.Equal(t, x.Version, edgeExplain(t, production, "1").Version)

	failing := newEdgeStore(g.store)
	operator := g.runner(t, failing, saga.RunnerOptions{})
	failing.failAppend(g.typ.Stream("1"), 1) // the skip is stored, the drain's first step is not
	require.Error(t, operator.Skip(ctx, "1", x.Parked.ID))

	require.NoError(t, production.CatchUp(ctx), "the outbox reads the skip's record")
	x = edgeExplain(t, production, "1")
	assert.Equal(t, []string{"start", "held-1", "held-2"}, x.State.Seen)
	assert.Empty(t, x.Pending, "nothing waits any more")
	assert.Nil(t, x.Parked)
}

// testEdge04RedriveKeepsARejectionOfACommandSentBeforeFrom: case 4.
// Redrive set the instance back to the step before from, which had not
// taken the rejection of a command sent before from; that command is never
// sent again (the outbox passed its step), so the rejection was lost for
// good. Promise (Runner.Redrive: "A recorded rejection comes back through
// the outbox and is fed to the instance again"; DESIGN: a rejection is fed
// back once): after the re-drive and the outbox, the rejection's handler
// has run in the re-driven history, and its effect is in the state once.
func testEdge04RedriveKeepsARejectionOfACommandSentBeforeFrom(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g, rejections := rejectingRig(t, st, "reject-4", func(string) bool { return true })
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	require.NoError(t, r.CatchUp(ctx), "the outbox sends the charge, which is rejected and fed back")
	require.Equal(t, []string{"start", "rejected:c"}, edgeSeen(t, r, "1"))
	var from uint64
	found := false
	for _, s := range edgeHistory(t, r, "1") {
		if s.Kind == "rejected" {
			from, found = s.Version, true
		}
	}
	require.True(t, found, "a rejection step")
	require.NotZero(t, from, "the command was sent at a step before the rejection's")

	_, err := r.Redrive(ctx, "1", from)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))

	assert.Equal(t, []string{"start", "rejected:c"}, edgeSeen(t, r, "1"),
		"the re-driven instance took the rejection again: its compensation is not lost")
	assert.EqualValues(t, 2, rejections.Load(), "the rejection handler ran in the first history and in the re-driven one")
	assert.Zero(t, g.account(t, "reject-4").Charges["c"], "the rejected charge never applied")
}

// rejectingRig is an edge rig whose events that charges picks (by their
// text) charge account, which rejects them (its ID starts with "reject"):
// the instance records each event's text and each rejection, which it
// counts.
func rejectingRig(t *testing.T, st edgeStores, account string, charges func(text string) bool) (*edgeRig, *atomic.Int32) {
	rejections := &atomic.Int32{}
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			if charges(e.Text) {
				out.Send(edgeCharge{Account: account, Ref: "c"})
			}
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, _ *saga.Output) error {
			rejections.Add(1)
			s.Seen = append(s.Seen, "rejected:"+ref)
			return nil
		},
	})
	return g, rejections
}

// testEdge05RejectionOfAnEarlierCommandAfterALaterOneIsHandled: case 5.
// Rejections were deduplicated by one highest-seen number, so the
// rejection of an earlier command, fed back after a later one's, was a
// Duplicate and its handler never ran. Promise (Runner.Reject: "the
// instance's OnRejected handler runs once"; DESIGN "rejections (per
// command)"): each command's rejection is handled once, in any order.
func testEdge05RejectionOfAnEarlierCommandAfterALaterOneIsHandled(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeCharge{Account: "acct5", Ref: e.Text})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "first"})
	edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "second"})
	ids := map[string]string{}
	for _, s := range edgeHistory(t, r, "1") {
		for _, c := range s.Commands {
			ids[c.Command.(edgeCharge).Ref] = c.ID
		}
	}
	require.Len(t, ids, 2)

	out, err := r.Reject(ctx, "1", ids["second"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out, "the later command's rejection")
	out, err = r.Reject(ctx, "1", ids["first"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out, "the earlier command's rejection is not a duplicate of the later one's")

	seen := edgeSeen(t, r, "1")
	assert.Equal(t, 1, edgeCount(seen, "rejected:second"), "seen: %v", seen)
	assert.Equal(t, 1, edgeCount(seen, "rejected:first"), "both compensations ran: %v", seen)
	out, err = r.Reject(ctx, "1", ids["first"], errors.New("declined"))
	require.NoError(t, err)
	assert.Equal(t, saga.Duplicate, out, "a second rejection of one command is the duplicate")
}

// testEdge06ConcurrentOperatorsDoNotLoseTheNextParkedMessage: case 6. Two
// operators act on the same parked message P at once; the first one
// retries it, P succeeds, and the held message Q runs, fails and is
// parked; the second one, acting on the P it saw, un-parked Q (Retry: P is
// a duplicate now, and its step clears the parked message) or skipped Q
// (Skip: its append lost to the first operator's steps, and the reload
// skipped whatever was parked then). Q was then neither parked, held nor
// handled. Promise (DESIGN "Operator actions are conditional on what the
// operator saw"): Q stays parked (or is handled); it is never dropped by an
// action meant for P.
//
// Both operators saw P parked (Explain) and name it; a store wrapper runs
// the first operator's whole Retry right after the second one's call has
// read the instance, deterministically, as a race between two operator
// processes would. The second one's action must then be refused as stale.
// (Written at first against the API that named only the instance.)
func testEdge06ConcurrentOperatorsDoNotLoseTheNextParkedMessage(t *testing.T, st edgeStores) {
	for _, op := range []string{"Retry", "Skip"} {
		t.Run(op, func(t *testing.T) {
			ctx := edgeContext(t)
			var fixed atomic.Bool
			g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
				switch {
				case e.Text == "P" && !fixed.Load():
					return errors.New("P fails until it is fixed")
				case e.Text == "Q":
					return errors.New("Q always fails")
				}
				s.Seen = append(s.Seen, e.Text)
				return nil
			}})
			first := g.runner(t, nil, saga.RunnerOptions{})
			racing := newEdgeStore(g.store)
			second := g.runner(t, racing, saga.RunnerOptions{NoCache: true})
			require.Equal(t, saga.Handled, edgeDeliver(t, first, "s", 0, edgeEvent{ID: "1", Text: "start"}))
			require.Equal(t, saga.Parked, edgeDeliver(t, first, "s", 1, edgeEvent{ID: "1", Text: "P"}))
			require.Equal(t, saga.Held, edgeDeliver(t, first, "s", 2, edgeEvent{ID: "1", Text: "Q"}))
			fixed.Store(true)
			p := edgeExplain(t, second, "1").Parked
			require.NotNil(t, p, "both operators see P parked")

			ran := false
			racing.onRead(g.typ.Stream("1"), func() {
				// The second operator has read the instance with P parked; the
				// first one's Retry runs to its end now.
				ran = true
				out, err := first.Retry(ctx, "1", p.ID)
				require.NoError(t, err)
				require.Equal(t, saga.Handled, out, "the first operator's retry of P succeeds")
				x := edgeExplain(t, first, "1")
				require.NotNil(t, x.Parked, "Q failed after P was resolved, and is parked")
				require.Equal(t, uint64(2), x.Parked.Sequence)
			})
			var err error
			if op == "Retry" {
				_, err = second.Retry(ctx, "1", p.ID)
			} else {
				err = second.Skip(ctx, "1", p.ID)
			}
			require.True(t, ran, "the first operator acted between the second one's read and its step")
			t.Logf("the second operator's %s: %v", op, err)
			assert.ErrorIs(t, err, saga.ErrStale, "the second operator acted on a P that is no longer parked")

			x := edgeExplain(t, first, "1")
			t.Logf("the last step: %s of #%d of %q", x.LastStep.Kind, x.LastStep.Sequence, x.LastStep.Source)
			qParked := x.Parked != nil && x.Parked.Source == "s" && x.Parked.Sequence == 2
			qHeld := slices.ContainsFunc(x.Held, func(h saga.HeldMessage) bool { return h.Source == "s" && h.Sequence == 2 })
			assert.True(t, qParked || qHeld || slices.Contains(x.State.Seen, "Q"),
				"Q is still parked, held or handled, not lost: parked %+v, held %+v, seen %v", x.Parked, x.Held, x.State.Seen)
		})
	}
}

// testEdge07RejectionOfACommandSentByTheCompletingStepIsHandled: case 7. A
// step that sends a command and completes the instance never saw that
// command's rejection: the instance, complete, ignored it, so OnRejected
// did not run and the compensation was lost. Promise (OnRejected: "The
// rejection reaches the instance exactly once, as a step ... This is where
// compensation starts"; DESIGN: a rejection is fed back once): the
// compensation handler runs exactly once.
func testEdge07RejectionOfACommandSentByTheCompletingStepIsHandled(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	var compensations atomic.Int32
	g := newEdgeRig(t, st, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.Send(edgeCharge{Account: "reject-7", Ref: "final"})
			out.Complete()
			return nil
		},
		rejected: func(_ context.Context, s *edgeState, ref string, _ error, _ *saga.Output) error {
			compensations.Add(1)
			s.Seen = append(s.Seen, "rejected:"+ref)
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "finish"})
	require.NoError(t, r.CatchUp(ctx), "the outbox sends the charge; the account rejects it")
	require.NoError(t, r.CatchUp(ctx))
	assert.EqualValues(t, 1, compensations.Load(), "the rejection of the completing step's command reached OnRejected once")
}
