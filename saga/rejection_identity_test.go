package saga_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/saga"
)

// A rejection keeps the identity of its error (issue 23, item 3).

// testARejectionKeepsTheIdentityOfItsError: issue 23, item 3. OnRejected
// got the reason as text only, so errors.Is(reason, ErrPaymentDeclined)
// was false. Promise: with the error registered (codec.RegisterError), the
// reason matches it, in the handler the outbox feeds and in another
// process that takes the rejection later from the record.
func testARejectionKeepsTheIdentityOfItsError(t *testing.T, st edgeStores) {
	ctx := edgeContext(t)
	hooks := func(fail bool) edgeHooks {
		return edgeHooks{
			event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
				switch {
				case e.Text == "poison" && fail:
					return errors.New("the handler fails on poison")
				case e.Text == "charge":
					out.Send(edgeCharge{Account: "reject-" + e.ID, Ref: e.ID})
				}
				s.Seen = append(s.Seen, e.Text)
				return nil
			},
			rejected: func(_ context.Context, s *edgeState, ref string, reason error, _ *saga.Output) error {
				s.Seen = append(s.Seen, fmt.Sprintf("rejected %s: %v, declined: %t", ref, reason, errors.Is(reason, errEdgeDeclined)))
				return nil
			},
		}
	}
	g := newEdgeRig(t, st, hooks(true))
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "a", 0, edgeEvent{ID: "1", Text: "charge"})
	require.NoError(t, r.CatchUp(ctx))
	assert.Equal(t, []string{"charge", "rejected 1: account reject-1: declined, declined: true"}, edgeSeen(t, r, "1"))

	// Instance 2 is parked when its rejection comes back: the rejection is
	// held in its record, and another process takes it after the fix.
	edgeDeliver(t, r, "b", 0, edgeEvent{ID: "2", Text: "charge"})
	require.Equal(t, saga.Parked, edgeDeliver(t, r, "b", 1, edgeEvent{ID: "2", Text: "poison"}))
	require.NoError(t, r.CatchUp(ctx))
	x := edgeExplain(t, r, "2")
	require.Len(t, x.Held, 1, "the rejection waits behind the parked message")
	fixed := g.sibling(t, hooks(false), false).runner(t, nil, saga.RunnerOptions{})
	_, err := fixed.Retry(ctx, "2", x.Parked.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"charge", "poison", "rejected 2: account reject-2: declined, declined: true"}, edgeSeen(t, fixed, "2"))
}
