package saga_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/saga"
)

// Hostile cases of the trust review (issue "Trust boundaries").

// TestAPreemptedCommandIDParksTheInstanceInsteadOfVanishing: finding 8. A
// saga's command IDs can be computed (or read from the database) before the
// outbox sends them. A sender that picks its own IDs dispatched a harmless
// command of another type to the same aggregate under a saga's command ID
// first, and the bus then answered the saga's real command as a duplicate
// of it: the charge never applied, and nothing said so. The bus now refuses
// an ID reused by another command type (command.ErrCommandIDReused), and
// the saga parks its instance on the command, where Explain shows it.
func TestAPreemptedCommandIDParksTheInstanceInsteadOfVanishing(t *testing.T) {
	ctx := context.Background()
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{
		event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			out.Send(edgeCharge{Account: "acct-1", Ref: "c"})
			return nil
		},
	})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})
	x := edgeExplain(t, r, "1")
	require.Len(t, x.Unsent, 1, "the charge waits for the outbox")
	id := x.Unsent[0].ID

	_, err := g.bus.Dispatch(ctx, command.Message{ID: id, Command: edgeNotify{Account: "acct-1", Ref: "harmless"}})
	require.NoError(t, err, "the preempting command")
	require.NoError(t, r.CatchUp(ctx), "the outbox goes on")

	acct := g.account(t, "acct-1")
	assert.Equal(t, 1, acct.Notices["harmless"])
	assert.Zero(t, acct.Charges["c"], "the charge applied under a reused ID")
	x = edgeExplain(t, r, "1")
	require.NotNil(t, x.Parked, "the saga's real command vanished as a duplicate")
	assert.Equal(t, "command", x.Parked.Kind)
	assert.Equal(t, id, x.Parked.Command)
	assert.True(t, strings.Contains(x.Parked.Error, "reused") || strings.Contains(x.Parked.Error, "another"), "the parked command's error: %s", x.Parked.Error)
}

// TestCraftedDeliverySourcesCannotFillAnInstance: finding 9. Deliver took
// a Source of any length, and every step record copies each source's
// progress: 59 crafted deliveries with long sources filled one instance's
// record to the store's limit, after which it refused its real messages
// for good. A source is now checked as a stream name (at most 512 bytes),
// and 59 crafted deliveries of the longest sources leave the instance
// taking its real messages.
func TestCraftedDeliverySourcesCannotFillAnInstance(t *testing.T) {
	ctx := context.Background()
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-1", 0, edgeEvent{ID: "1", Text: "start"})

	_, err := r.Deliver(ctx, saga.Delivery{Source: strings.Repeat("s", 16<<10), Sequence: 0, Event: edgeAny{ID: "1", Text: "crafted"}})
	require.Error(t, err, "a 16 KiB source")
	var bad *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, "delivery source", bad.Field)

	for i := range 59 {
		src := fmt.Sprintf("%03d", i) + strings.Repeat("s", storekit.MaxStreamLen-3)
		edgeDeliver(t, r, src, 0, edgeAny{ID: "1", Text: "crafted"})
	}
	assert.Equal(t, saga.Handled, edgeDeliver(t, r, "src-1", 1, edgeEvent{ID: "1", Text: "real"}),
		"the instance's real message after 59 crafted sources")
	assert.Contains(t, edgeSeen(t, r, "1"), "real")
}
