package saga_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// Found by the widened simulation (internal/sim, the tabs workload), and
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
	r := g.runner(t, nil, saga.RunnerOptions{})
	ev := g.put(t, "src-1", edgeEvent{ID: "1", Text: "start"})
	out, err := r.HandleStored(ctx, ev)
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "feed", 0, edgeAny{ID: "1", Text: "delivered"}))

	n, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	x := edgeExplain(t, r, "1")
	assert.Equal(t, []string{"start", "delivered"}, x.State.Seen, "the start first, then the delivery, once each")
	assert.True(t, x.Started)
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
