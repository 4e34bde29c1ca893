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
