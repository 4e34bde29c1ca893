package saga_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// testStaleViewDoesNotLoseAPoisonCommandAgain: found by the widened
// simulation (tabs seed 1243). Two runners without leases share the
// checkpoints. A's outbox parks an instance on a command its aggregate
// cannot carry out; an operator retries it, which records the command
// again; B's outbox sends that record, the command fails again, and B
// decides the park on its cached view from before A's park. That decision
// is a record at the version A's park took, with the same message: the
// same event ID, which the store answered as a duplicate, and B took it
// for its own step stored already. The instance was never parked again:
// the command neither applied nor waited for an operator. Promise: a
// command that keeps failing parks its instance, however stale a
// runner's view.
func testStaleViewDoesNotLoseAPoisonCommandAgain(t *testing.T, st edgeStores) {
	ctx := context.Background()
	g := newEdgeRig(t, st, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeCharge{Account: "panic-stale", Ref: e.ID})
		return nil
	}})
	b := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
	edgeDeliver(t, b, "src-1", 0, edgeEvent{ID: "1", Text: "start"}) // B's cache holds the instance at its first step
	a := g.runner(t, nil, saga.RunnerOptions{BatchSize: 1})
	require.NoError(t, a.CatchUp(ctx), "A's outbox parks the instance on its command")
	x := edgeExplain(t, a, "1")
	require.NotNil(t, x.Parked, "A parked the instance")
	require.Equal(t, "command", x.Parked.Kind)

	operator := g.runner(t, nil, saga.RunnerOptions{NoCache: true})
	_, err := operator.Retry(ctx, "1", x.Parked.ID)
	require.NoError(t, err, "the operator retries the command")
	require.NoError(t, b.CatchUp(ctx), "B's outbox sends the retried command, which fails again")

	x = edgeExplain(t, operator, "1")
	require.NotNil(t, x.Parked, "the command failed again and the instance is not parked on it: lost")
	assert.Equal(t, "command", x.Parked.Kind)
	assert.Zero(t, g.account(t, "panic-stale").Charges["1"])
}
