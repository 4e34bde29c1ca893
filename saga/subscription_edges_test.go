package saga_test

// Edges of the check that a saga's code still reads what its
// subscription read (issue 23, item 12), found by review.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/upcast"
)

type extraEvent struct{ ID, Text string }

// subscriberCode is a version of the edge saga's code (only its events, no
// commands) on g's store and checkpoints, whose registry set-up takes
// extra before it is used: the name and version of edgeEvent, upcasters,
// an extra mapped type.
func subscriberCode(t *testing.T, g *edgeRig, eventName string, eventVersion uint32, extra func(reg *codec.Registry, typ *saga.Type[edgeState])) *saga.Runner[edgeState] {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[edgeState](reg, "edge.state", 1))
	require.NoError(t, codec.Register[edgeEvent](reg, eventName, eventVersion))
	typ, err := saga.New[edgeState]("edge", reg, saga.Options[edgeState]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(typ, saga.Event[edgeState, edgeEvent]{Starts: true,
		Instance: func(e edgeEvent, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	if extra != nil {
		extra(reg, typ)
	}
	r, err := saga.NewRunner(typ, g.store, command.New(g.store, reg, command.Options{}), saga.RunnerOptions{
		Clock: g.clock, Checkpoints: g.cps, Logger: testLogger(t), Retry: retry.Policy{Attempts: 1, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	return r
}

// putAs stores ev under name at version, as code registering it so.
func putAs(t *testing.T, g *edgeRig, stream, name string, version uint32, ev edgeEvent) {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[edgeEvent](reg, name, version))
	data, err := reg.Encode(ev)
	require.NoError(t, err)
	_, err = g.store.Append(context.Background(), stream, eventstore.Any, data)
	require.NoError(t, err)
}

// testARollbackAfterAddingAnEventTypeIsNotRefused: found by review of
// item 12. A release maps a brand-new event type, then the code before it
// comes back (a rollback, or an old process restarting during the rolling
// deploy): nothing of that type was stored, nothing can pass the saga by,
// yet the old code was refused. Promise: it starts.
func testARollbackAfterAddingAnEventTypeIsNotRefused(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	old := subscriberCode(t, g, "edge.event", 1, nil)
	g.put(t, "feed-1", edgeEvent{ID: "1", Text: "start"})
	require.NoError(t, old.CatchUp(ctx))

	next := subscriberCode(t, g, "edge.event", 1, func(reg *codec.Registry, typ *saga.Type[edgeState]) {
		require.NoError(t, codec.Register[extraEvent](reg, "edge.extra", 1))
		require.NoError(t, saga.On(typ, saga.Event[edgeState, extraEvent]{
			Instance: func(e extraEvent, _ eventstore.Metadata) string { return e.ID },
			Handle: func(_ context.Context, s *edgeState, e extraEvent, _ *saga.Output) error {
				s.Seen = append(s.Seen, e.Text)
				return nil
			}}))
	})
	require.NoError(t, next.CatchUp(ctx), "the release starts")

	// Rolled back: no event of "edge.extra" was ever stored.
	g.put(t, "feed-1", edgeEvent{ID: "1", Text: "after the rollback"})
	rolledBack := subscriberCode(t, g, "edge.event", 1, nil)
	require.NoError(t, rolledBack.CatchUp(ctx), "nothing stored is forgotten: the rollback must start")
	assert.Equal(t, []string{"start", "after the rollback"}, edgeSeen(t, rolledBack, "1"))
}

// testAForgottenRenameOfATypeWithAnOldDropIsRefused: found by review of
// item 12. A rename deployed without its upcast.Rename step, for a type
// whose older schema version an upcaster still drops: the check took the
// old name as read (some step applies to it), and the stored events of
// the old name at its last version passed the saga by. Promise: refused.
func testAForgottenRenameOfATypeWithAnOldDropIsRefused(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, st, edgeHooks{})
	oldDrop := func(reg *codec.Registry, _ *saga.Type[edgeState]) {
		require.NoError(t, reg.Upcast(upcast.Drop("edge.event", 1))) // v1 of the type was dropped long ago
	}
	old := subscriberCode(t, g, "edge.event", 2, oldDrop)
	putAs(t, g, "feed-1", "edge.event", 2, edgeEvent{ID: "1", Text: "start"})
	require.NoError(t, old.CatchUp(ctx))
	require.Equal(t, []string{"start"}, edgeSeen(t, old, "1"))
	putAs(t, g, "feed-1", "edge.event", 2, edgeEvent{ID: "1", Text: "more"}) // stored under the old name

	// The rename, without its Rename step; the old Drop stays.
	renamed := subscriberCode(t, g, "edge.renamed", 2, oldDrop)
	putAs(t, g, "feed-2", "edge.renamed", 2, edgeEvent{ID: "2", Text: "later"})
	require.ErrorIs(t, renamed.CatchUp(ctx), saga.ErrInvalidSetup, "edge.event v2 events are no longer read")
}

// testAForgottenRenameStopsTheSaga: issue 23, item 12. When the code
// renamed a type the saga maps without the rename step, the subscription
// no longer asked for the old name: nothing started, nothing went on, and
// the events checkpoint moved past the stored events of the old name for
// good, in silence. Promise: Run and CatchUp refuse to start, naming the
// type, whether the saga's runners recorded what the subscription read
// or only its step records show it; nothing moves meanwhile; and with the
// rename step the events of the old name reach the instances.
func testAForgottenRenameStopsTheSaga(t *testing.T, st edgeStores) {
	for _, recorded := range []bool{true, false} {
		t.Run(map[bool]string{true: "recorded", false: "records only"}[recorded], func(t *testing.T) {
			ctx := edgeContext(t)
			g := newEdgeRig(t, st, edgeHooks{})
			old := g.runner(t, nil, saga.RunnerOptions{})
			start := g.put(t, "feed-1", edgeEvent{ID: "1", Text: "start"})
			if recorded {
				require.NoError(t, old.CatchUp(ctx))
			} else { // a process that feeds the saga itself, as runners before the check did
				out, err := old.HandleStored(ctx, start)
				require.NoError(t, err)
				require.Equal(t, saga.Handled, out)
			}
			g.put(t, "feed-1", edgeEvent{ID: "1", Text: "more"}) // stored under the old name
			code := g.sibling(t, edgeHooks{eventName: "edge.renamed"}, false)
			code.put(t, "feed-2", edgeEvent{ID: "2", Text: "later"}) // under the new one: it would move the checkpoint past "more"

			renamed := code.runner(t, nil, saga.RunnerOptions{})
			for range 2 {
				err := renamed.CatchUp(ctx)
				require.ErrorIs(t, err, saga.ErrInvalidSetup, "the code does not read what the saga read")
				assert.Contains(t, err.Error(), `"edge.event"`)
				assert.Contains(t, err.Error(), "upcast.Rename")
			}
			stats, err := renamed.Stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{"edge.event"}, stats.ForgottenTypes)
			assert.Equal(t, []string{"start"}, edgeSeen(t, renamed, "1"))
			assert.False(t, edgeExplain(t, renamed, "2").Exists, "nothing moved")

			fixed := g.sibling(t, edgeHooks{eventName: "edge.renamed", renamedFrom: "edge.event"}, false).runner(t, nil, saga.RunnerOptions{})
			require.NoError(t, fixed.CatchUp(ctx))
			assert.Equal(t, []string{"start", "more"}, edgeSeen(t, fixed, "1"), "the event of the old name reaches its instance")
			assert.Equal(t, []string{"later"}, edgeSeen(t, fixed, "2"))
			stats, err = fixed.Stats(ctx)
			require.NoError(t, err)
			assert.Empty(t, stats.ForgottenTypes)

			// The code after the fix reads the old name through its rename
			// step; code that drops the step again is refused again.
			again := g.sibling(t, edgeHooks{eventName: "edge.renamed"}, false).runner(t, nil, saga.RunnerOptions{})
			require.ErrorIs(t, again.CatchUp(ctx), saga.ErrInvalidSetup)
		})
	}
}
