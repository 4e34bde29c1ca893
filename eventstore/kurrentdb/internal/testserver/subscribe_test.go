package testserver

import (
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/stretchr/testify/require"
)

func subscribeAll(t *testing.T, c *esdb.Client, opts esdb.SubscribeToAllOptions) *esdb.Subscription {
	t.Helper()
	sub, err := c.SubscribeToAll(ctxT(t), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func TestSubscribeToAllCatchesUpThenGoesLive(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "a", esdb.NoStream{}, events(3)...)

	sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.Start{}})
	stored := untilCaughtUp(t, sub)
	require.Len(t, stored, 3)

	live := appendOK(t, c, "b", esdb.NoStream{}, events(2)...)
	e1, e2 := nextEvent(t, sub), nextEvent(t, sub)
	require.Equal(t, "b", e1.StreamID)
	require.Equal(t, []uint64{0, 1}, []uint64{e1.EventNumber, e2.EventNumber})
	require.Equal(t, esdb.Position{Commit: live.CommitPosition, Prepare: live.PreparePosition}, e2.Position)
}

func TestSubscribeToAllStartsAfterThePosition(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "a", esdb.NoStream{}, events(4)...)
	all := readAll(t, c, esdb.ReadAllOptions{}, 10)

	sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: all[1].Position})
	got := untilCaughtUp(t, sub)
	require.Equal(t, []uint64{2, 3}, numbers(got))
}

func TestSubscribeToAllFromEndSeesOnlyNewEvents(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "a", esdb.NoStream{}, events(2)...)

	sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.End{}})
	require.Empty(t, untilCaughtUp(t, sub))
	appendOK(t, c, "a", esdb.Revision(1), events(1)...)
	require.Equal(t, uint64(2), nextEvent(t, sub).EventNumber)
}

func TestFilteredSubscriptionSendsCheckpointsBetweenEvents(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "noise", esdb.NoStream{}, events(100)...)
	appendOK(t, c, "wanted-1", esdb.NoStream{}, events(1)...)

	sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{
		From:               esdb.Start{},
		Filter:             &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"wanted-"}},
		MaxSearchWindow:    10,
		CheckpointInterval: 2,
	})
	all := readAll(t, c, esdb.ReadAllOptions{}, 1000)
	var checkpoints []esdb.Position
	var got *esdb.RecordedEvent
	for got == nil {
		e := next(t, sub)
		require.Nil(t, e.SubscriptionDropped)
		require.Nil(t, e.CaughtUp, "caught up before the wanted event")
		if e.CheckPointReached != nil {
			checkpoints = append(checkpoints, *e.CheckPointReached)
		}
		if e.EventAppeared != nil {
			got = e.EventAppeared.OriginalEvent()
		}
	}
	require.Equal(t, "wanted-1", got.StreamID)
	// 100 events scanned before it, a checkpoint every 10 × 2 of them.
	require.Len(t, checkpoints, 5)
	for i, cp := range checkpoints {
		scanned := all[20*(i+1)-1]
		require.True(t, pos(scanned).less(position{cp.Commit, cp.Prepare}), "a checkpoint is past what was scanned")
		require.True(t, position{cp.Commit, cp.Prepare}.less(pos(all[20*(i+1)])), "and before the next event")
	}

	// Resuming from the last checkpoint starts with the next event, exactly.
	resumed := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: checkpoints[4]})
	require.Equal(t, got.EventID, nextEvent(t, resumed).EventID)
}

func TestFilterOnEventTypeByPrefixAndRegex(t *testing.T) {
	srv, err := Start(Options{StatsEvery: 1}) // a $stats event after every append
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := connect(t, srv)
	appendOK(t, c, "o-1", esdb.NoStream{},
		event("order.placed", `{}`), event("order.paid", `{}`), event("invoice.sent", `{}`), event("order.placedLate", `{}`))

	types := func(f *esdb.SubscriptionFilter) []string {
		sub := subscribeAll(t, c, esdb.SubscribeToAllOptions{From: esdb.Start{}, Filter: f})
		var out []string
		for _, e := range untilCaughtUp(t, sub) {
			out = append(out, e.EventType)
		}
		return out
	}
	require.Equal(t, []string{"order.placed", "order.paid", "order.placedLate"},
		types(&esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: []string{"order."}}))
	require.Equal(t, []string{"order.placed", "order.paid"},
		types(&esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: `^(?:order\.placed|order\.paid)$`}))
	require.Equal(t, []string{"order.placed", "order.paid", "invoice.sent", "order.placedLate"},
		types(esdb.ExcludeSystemEventsFilter()), "the $stats and $metadata noise is filtered on the server")
}

func TestSubscribeToStream(t *testing.T) {
	c := connect(t, quiet(t))
	appendOK(t, c, "s", esdb.NoStream{}, events(3)...)
	appendOK(t, c, "other", esdb.NoStream{}, events(1)...)
	subscribe := func(from esdb.StreamPosition) *esdb.Subscription {
		sub, err := c.SubscribeToStream(ctxT(t), "s", esdb.SubscribeToStreamOptions{From: from})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	fromStart, afterOne, fromEnd := subscribe(esdb.Start{}), subscribe(esdb.Revision(1)), subscribe(esdb.End{})
	require.Equal(t, []uint64{0, 1, 2}, numbers(untilCaughtUp(t, fromStart)))
	require.Equal(t, []uint64{2}, numbers(untilCaughtUp(t, afterOne)))
	require.Empty(t, untilCaughtUp(t, fromEnd))

	appendOK(t, c, "other", esdb.Revision(0), events(1)...)
	appendOK(t, c, "s", esdb.Revision(2), events(1)...)
	for _, sub := range []*esdb.Subscription{fromStart, afterOne, fromEnd} {
		e := nextEvent(t, sub)
		require.Equal(t, "s", e.StreamID)
		require.Equal(t, uint64(3), e.EventNumber)
	}

	// A stream that does not exist yet: confirmed, caught up, then live.
	later, err := c.SubscribeToStream(ctxT(t), "later", esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = later.Close() })
	require.Empty(t, untilCaughtUp(t, later))
	appendOK(t, c, "later", esdb.NoStream{}, events(1)...)
	require.Equal(t, "later", nextEvent(t, later).StreamID)
}
