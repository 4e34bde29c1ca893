package saga_test

// Regression tests for the edges of issue 20 where one instance's problem
// stopped every instance (cases 11-14). DESIGN "Isolate per instance":
// anything that concerns one instance parks that instance with a reason; it
// never stops the runner, the outbox or another instance. The set-up is in
// edges_lost_test.go.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/saga"
)

// edgeOthersGoOn stores an event for instance "other" (after whatever the
// test stored), catches r up, and checks that the catch-up did not fail
// and that "other" took its event.
func edgeOthersGoOn(t *testing.T, g *edgeRig, r *saga.Runner[edgeState]) {
	t.Helper()
	ctx := edgeContext(t)
	g.put(t, "src-other", edgeEvent{ID: "other", Text: "other"})
	err := r.CatchUp(ctx)
	assert.NoError(t, err, "one instance's problem does not stop the saga")
	assert.Equal(t, []string{"other"}, edgeSeen(t, r, "other"), "another instance's event is handled")
}

// testEdge11OversizedStepRecordDoesNotStopTheSaga: case 11. One 800 KiB
// event (the store takes up to 1 MiB), or 300 KiB events held behind a
// parked one, made a step record over the store's limit: the append was
// refused, the batch failed, and CatchUp and Run ended, on every restart.
// Promise (DESIGN "Isolate per instance ... a record the store refuses";
// "a step record has a size budget checked before the append"): the
// catch-up does not fail, and other instances' events are handled.
func testEdge11OversizedStepRecordDoesNotStopTheSaga(t *testing.T, st edgeStores) {
	t.Run("OneLargeEvent", func(t *testing.T) {
		g := newEdgeRig(t, st, edgeHooks{})
		big := edgeEvent{ID: "big", Text: "big", Pad: strings.Repeat("x", 800<<10)}
		g.put(t, "src-big", big) // the store takes it
		r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
		edgeOthersGoOn(t, g, r)
		assert.Equal(t, []string{"big"}, edgeSeen(t, r, "big"), "the large event is handled: its step keeps it by reference")
	})
	t.Run("LargeEventsHeldBehindAParkedOne", func(t *testing.T) {
		g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
			if e.Text == "poison" {
				return errors.New("the handler fails on poison")
			}
			s.Seen = append(s.Seen, e.Text)
			return nil
		}})
		g.put(t, "src-p", edgeEvent{ID: "parked", Text: "start"})
		g.put(t, "src-p", edgeEvent{ID: "parked", Text: "poison"})
		for i := range 3 {
			g.put(t, "src-p", edgeEvent{ID: "parked", Text: "held", Pad: strings.Repeat(string(rune('a'+i)), 300<<10)})
		}
		r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
		edgeOthersGoOn(t, g, r)
		x := edgeExplain(t, r, "parked")
		require.NotNil(t, x.Parked)
		assert.Equal(t, map[string]uint64{"src-p": 1}, x.Pending, "the held events wait in their stream, read again from the parked one on")
		require.NoError(t, r.Skip(edgeContext(t), "parked", x.Parked.ID))
		assert.Equal(t, []string{"start", "held", "held", "held"}, edgeSeen(t, r, "parked"), "after the skip, the held events are read again and handled")
	})
}

// testEdge12ForeignOrDamagedRecordDoesNotStopTheSaga: case 12. A foreign
// event at the head of one instance stream, or one damaged step record
// anywhere, stopped Run and CatchUp for every instance; with the damaged
// record, the start-up deadline scan failed before any event was handled.
// Promise (DESIGN "Isolate per instance ... corrupt or foreign data"): the
// catch-up does not fail, and other instances' events are handled.
func testEdge12ForeignOrDamagedRecordDoesNotStopTheSaga(t *testing.T, st edgeStores) {
	t.Run("ForeignEventAtTheHeadOfAnInstanceStream", func(t *testing.T) {
		g := newEdgeRig(t, st, edgeHooks{})
		ctx := edgeContext(t)
		_, err := g.store.Append(trusted.Writer(ctx), g.typ.Stream("bad"), eventstore.NoStream,
			eventstore.EventData{Type: "someone.elses", SchemaVersion: 1, Data: []byte(`{}`)})
		require.NoError(t, err)
		ev := g.put(t, "src-bad", edgeEvent{ID: "bad", Text: "for the instance with the foreign head"})
		r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
		edgeOthersGoOn(t, g, r)
		edgeDeadLettered(t, g, r, ev, "saga:edge-bad", "version 0")
	})
	t.Run("DamagedStepRecord", func(t *testing.T) {
		g := newEdgeRig(t, st, edgeHooks{})
		ctx := edgeContext(t)
		edgeDeliver(t, g.runner(t, nil, saga.RunnerOptions{}), "src-damaged", 0, edgeEvent{ID: "damaged", Text: "start"})
		var rec eventstore.Event
		for ev, err := range g.store.ReadStream(ctx, g.typ.Stream("damaged"), eventstore.Forward(0)) {
			require.NoError(t, err)
			rec = ev
		}
		// A step record of the same type, whose data was damaged.
		_, err := g.store.Append(trusted.Writer(ctx), rec.StreamID, eventstore.Exact(rec.Version),
			eventstore.EventData{Type: rec.Type, SchemaVersion: rec.SchemaVersion, Data: []byte(`{"handled":{"kind":`)})
		require.NoError(t, err)
		ev := g.put(t, "src-damaged", edgeEvent{ID: "damaged", Text: "after the damage"})
		r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
		edgeOthersGoOn(t, g, r)
		edgeDeadLettered(t, g, r, ev, "saga:edge-damaged", "version 1")
		stats, err := r.Stats(ctx)
		require.NoError(t, err)
		assert.Positive(t, stats.Unreadable, "the damaged record is counted")
	})
}

// edgeDeadLettered checks that ev, which its instance could not take, is a
// dead letter of the saga's events consumer whose error names the
// instance's stream and where in it the problem is, and is counted.
func edgeDeadLettered(t *testing.T, g *edgeRig, r *saga.Runner[edgeState], ev eventstore.Event, stream, where string) {
	t.Helper()
	ctx := edgeContext(t)
	var found []eventstore.DeadLetter
	for dl, err := range g.cps.DeadLetters(ctx, eventsConsumer(r)) {
		require.NoError(t, err)
		found = append(found, dl)
	}
	require.Len(t, found, 1, "the event its instance cannot take waits as a dead letter")
	assert.Equal(t, ev.ID, found[0].Event.ID)
	assert.Contains(t, found[0].Error, stream)
	assert.Contains(t, found[0].Error, where)
	stats, err := r.Stats(ctx)
	require.NoError(t, err)
	assert.Positive(t, stats.Parked)
}

// testEdge13PoisonCommandDoesNotStopTheOutbox: case 13. A command that the
// bus always fails without calling it a rejection (an empty aggregate ID,
// an aggregate whose Handle panics, a recorded command that no longer
// decodes) stopped the outbox, and CatchUp and Run, for every instance,
// forever. Promise (DESIGN "Isolate per instance ... a poison or
// undecodable command ... never stops the runner, the outbox or another
// instance"): the catch-up does not fail, and another instance's command
// is sent.
func testEdge13PoisonCommandDoesNotStopTheOutbox(t *testing.T, st edgeStores) {
	send := func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.ID)
		if e.Text == "notify" {
			out.Send(edgeNotify{Account: "good", Ref: e.ID})
		} else {
			out.Send(edgeCharge{Account: e.Text, Ref: e.ID})
		}
		return nil
	}
	check := func(t *testing.T, g *edgeRig, r *saga.Runner[edgeState], kind string) {
		t.Helper()
		ctx := edgeContext(t)
		edgeDeliver(t, r, "src-good", 0, edgeEvent{ID: "good", Text: "notify"})
		err := r.CatchUp(ctx)
		assert.NoError(t, err, "one instance's command does not stop the outbox")
		assert.Equal(t, 1, g.account(t, "good").Notices["good"], "another instance's command is sent")
		x := edgeExplain(t, r, "poison")
		require.NotNil(t, x.Parked, "the instance whose command keeps failing is parked on it")
		assert.Equal(t, kind, x.Parked.Kind)
		assert.NotEmpty(t, x.Parked.Error)
		if kind == "command" {
			assert.NotEmpty(t, x.Parked.Command)
		}
	}
	// A command without a target fails the step that sends it (the event
	// is parked); the others fail in the bus, and park on the command.
	for _, c := range []struct{ name, account, kind string }{
		{"EmptyAggregateID", "", "event"},
		{"AggregateHandlePanics", "panic-13", "command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newEdgeRig(t, st, edgeHooks{event: send})
			r := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
			edgeDeliver(t, r, "src-poison", 0, edgeEvent{ID: "poison", Text: c.account})
			check(t, g, r, c.kind)
		})
	}
	t.Run("RecordedCommandNoLongerDecodes", func(t *testing.T) {
		old := newEdgeRig(t, st, edgeHooks{event: send})
		edgeDeliver(t, old.runner(t, nil, saga.RunnerOptions{}), "src-poison", 0, edgeEvent{ID: "poison", Text: "acct13"})
		// The new code no longer knows edgeCharge; the old step still holds one.
		current := old.sibling(t, edgeHooks{event: send}, true)
		check(t, current, current.runner(t, nil, saga.RunnerOptions{BatchSize: 1}), "command")
	})
}

// testEdge14ZeroTimeDeadlineDoesNotBlockItsSegment: case 14. One deadline
// scheduled at the zero time (ScheduleAt with a time an event left empty)
// sat at the top of its segment's heap and read as "no deadline", so no
// deadline of the segment fired any more. Promise (DESIGN "Isolate per
// instance ... an invalid deadline"; deadlines fire when due): another
// instance's due deadline fires.
func testEdge14ZeroTimeDeadlineDoesNotBlockItsSegment(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		var at time.Time // the event left it empty
		if e.Text == "soon" {
			at = out.Now().Add(time.Minute)
		}
		out.ScheduleAt("due", at, edgeDue{Text: e.ID})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-zero", 0, edgeEvent{ID: "zero", Text: "zero"})
	edgeDeliver(t, r, "src-other", 0, edgeEvent{ID: "other", Text: "soon"})
	g.clock.Advance(2 * time.Minute)
	fired, err := r.FireDue(ctx)
	require.NoError(t, err)
	t.Logf("fired %d", fired)
	assert.Contains(t, edgeSeen(t, r, "other"), "due:other", "the other instance's deadline fired when it was due")
	x := edgeExplain(t, r, "zero")
	require.NotNil(t, x.Parked, "the instance that scheduled at the zero time is parked on its event")
	assert.Contains(t, x.Parked.Error, "zero time")
}
