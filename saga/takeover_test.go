package saga_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// TestADeadlineSetByAFormerLeaseHolderFires: a runner waiting for the
// lease knows nothing of the deadlines the holder sets meanwhile, and the
// outbox checkpoint it takes over is past their records. Taking the lease,
// it must read them, or they never fire. (The two-runners tests cover the
// same with segments, less deterministically.)
func TestADeadlineSetByAFormerLeaseHolderFires(t *testing.T) {
	s, c := memory.New(), memory.New()
	t.Cleanup(func() { _ = s.Close() })
	f := newSale(t, twoRunnerStores{events: s, consumers: c, leases: c, ttl: 200 * time.Millisecond})
	ctx := context.Background()
	opts := saga.RunnerOptions{Leases: c}
	a := f.start(t, "first", opts)
	require.Eventually(t, func() bool { return len(leading(t, a)) == 1 }, twoRunnerWait, time.Millisecond)
	b := f.start(t, "second", opts) // waits for the leases

	// An order that waits for its payment deadline, set by the first
	// runner, whose outbox moves past the step that set it.
	id, seats, amount := "late", 1, int64(294)
	require.True(t, reservation.Expect(seats, amount).AfterDeadline)
	_, err := f.client.Dispatch(ctx, command.Message{ID: "place-" + id, Command: domain.PlaceOrder{OrderID: id, Seats: seats, AmountCents: amount}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		end, err := f.check.End(ctx, id)
		require.NoError(t, err)
		return end.Pending
	}, twoRunnerWait, time.Millisecond)
	var last eventstore.Position
	for ev, err := range s.ReadStream(ctx, saga.StreamPrefix+"sale-"+id, eventstore.Backward(eventstore.End)) {
		require.NoError(t, err)
		last = ev.Position
		break
	}
	require.Eventually(t, func() bool {
		cp, err := c.Checkpoint(ctx, outboxConsumer(a.runner))
		require.NoError(t, err)
		return !cp.Position.Before(last)
	}, twoRunnerWait, time.Millisecond, "the first runner's outbox did not pass the step that set the deadline")
	assert.Zero(t, b.stats(t).DeadlinesPending, "the waiting runner does not know of the deadline")

	a.stop(t)
	require.Eventually(t, func() bool { return len(leading(t, b)) == 1 }, twoRunnerWait, time.Millisecond,
		"the second runner did not take over")
	f.clock.Advance(reservation.PaymentWindow)
	require.Eventually(t, func() bool {
		end, err := f.check.End(ctx, id)
		require.NoError(t, err)
		return end.Rejected
	}, twoRunnerWait, time.Millisecond, "the deadline set by the first runner never fired")
}

// TestAGapMovesWithItsSegment: a runner reports the gaps of the segments
// it runs. When a second runner joins, the segment it takes leaves the
// first runner's report and enters its own (read from the store when it
// claims the segment); the gap in the segment the first keeps stays there.
func TestAGapMovesWithItsSegment(t *testing.T) {
	s, c := memory.New(), memory.New()
	t.Cleanup(func() { _ = s.Close() })
	f := newSale(t, twoRunnerStores{events: s, consumers: c, leases: c, ttl: 200 * time.Millisecond})
	ctx := context.Background()
	opts := saga.RunnerOptions{Leases: c, Segments: 2}
	a := f.start(t, "first", opts)
	require.Eventually(t, func() bool { return len(leading(t, a)) == 2 }, twoRunnerWait, time.Millisecond)

	// Message 1 of a broker's source, without message 0: each instance
	// holds it and waits. The first runner takes member slot 0, and so
	// keeps segment 0 when a second one joins.
	stays, moves := "gap-2", "gap-1"
	require.Equal(t, []int{0, 1}, []int{saga.Segment(stays, 2), saga.Segment(moves, 2)})
	for _, id := range []string{stays, moves} {
		out, err := a.runner.Deliver(ctx, saga.Delivery{Source: "broker", Sequence: 1, Event: domain.OrderPlaced{OrderID: id, Seats: 1, AmountCents: 100}})
		require.NoError(t, err)
		require.Equal(t, saga.Held, out)
	}
	gapsOf := func(p *process) []string {
		var ids []string
		for _, g := range p.runner.Gaps() {
			ids = append(ids, g.Instance)
		}
		return ids
	}
	assert.ElementsMatch(t, []string{stays, moves}, gapsOf(a))

	b := f.start(t, "second", opts)
	require.Eventually(t, func() bool {
		return slices.Equal(leading(t, a), []int{0}) && slices.Equal(leading(t, b), []int{1})
	}, twoRunnerWait, time.Millisecond, "the runners did not split the segments")
	require.Eventually(t, func() bool { return slices.Equal(gapsOf(b), []string{moves}) }, twoRunnerWait, time.Millisecond,
		"the runner that took segment 1 does not report its gap")
	assert.Equal(t, []string{stays}, gapsOf(a), "the first runner reports the gap of the segment it kept only")
	st := a.stats(t)
	assert.Equal(t, 1, st.Gaps)
	assert.Equal(t, []int{0}, st.HeldSegments)
}
