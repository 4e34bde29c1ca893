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
		Clock: g.clock, Checkpoints: g.cps, Logger: testLogger(t), Attempts: 1,
		Retry: saga.Backoff{Initial: time.Microsecond, Max: time.Microsecond}})
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
