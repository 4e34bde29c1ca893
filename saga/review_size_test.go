package saga_test

// Adversarial review of the saga rewrite (issue 20): the step record's size
// budget (saga/budget.go MaxStepSize). DESIGN "Records by reference and
// bounded ... a step record has a size budget checked before the append";
// issue 20: "a message whose record cannot fit parks its instance with a
// clear error". The rig is edges_lost_test.go's.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// TestReviewLargeDeliveryWhoseHandlerFailsIsParked: a delivery of 800 KB
// (Deliver takes it; the same delivery is handled fine when its handler
// succeeds: the step leaves the payload out) whose handler fails. The
// record that parks it keeps the payload inline, base64 in JSON, so it is
// over the store's 1 MiB: the store refuses the append, Deliver returns the
// store's invalid-argument error, nothing is parked, and every redelivery
// fails the same way: the message can neither be handled nor parked nor
// refused as too large. Promise (budget.go MaxStepSize: "so that the record
// that parks a message (the last record, and a reference to that message)
// always fits"; Deliver: a message the instance cannot keep within
// MaxStepSize "is a [*RecordSizeError]"). The cause: saga/decide.go
// decision.parked stores msg.in, a delivery's payload included, and
// saga/budget.go engine.encode exempts parking records from the budget.
// Check a delivery's payload against a budget at Deliver, or park a
// too-large delivery by reference with its payload dropped (Retry then
// refused, Skip allowed).
func TestReviewLargeDeliveryWhoseHandlerFailsIsParked(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	pad := strings.Repeat("x", 800<<10)
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "start", Pad: pad}),
		"a large delivery whose handler succeeds is handled")

	out, err := r.Deliver(ctx, saga.Delivery{Source: "s", Sequence: 1, Event: edgeEvent{ID: "1", Text: "poison", Pad: pad}})
	t.Logf("Deliver: %s, %v", out, err)
	if err != nil {
		assert.ErrorIs(t, err, saga.ErrRecordTooLarge, "if it is refused, it is refused as too large")
	} else {
		assert.Equal(t, saga.Parked, out)
	}
	x := edgeExplain(t, r, "1")
	assert.True(t, err != nil || x.Parked != nil, "the failing message is parked, or refused")
}

// longRejecter is an aggregate that refuses every command with a long
// reason (a validation report, say), and counts the commands it decided.
type longRejecter struct{}

var longRejections atomic.Int64

func (longRejecter) reject() ([]any, error) {
	longRejections.Add(1)
	return nil, errors.New(strings.Repeat("rule failed; ", 400)) // 5 KB, clipped to 4 KB
}

// TestReviewRejectionsHeldBehindAParkedMessageAreNotLost: a step sends 200
// commands; before the outbox sends them, the instance parks on a later
// message. Each command is rejected, and each rejection is held, inline
// with its reason, in the instance's record; around the 140th, the held
// rejections take the record past MaxStepSize, the hold is refused, and the
// outbox parks the whole sending record as a dead letter: the rejections
// after it never reach the instance, and the commands after it are never
// sent at all, even after the operator resolves the parked message.
// Promise (DESIGN "A command's outcome is final: a rejection is fed back to
// the instance once"; OnRejected: "The rejection reaches the instance
// exactly once"; "Records by reference": keep inline only what has no
// other home; the bus recorded each rejection in its aggregate's stream).
// The cause: saga/decide.go decision.hold keeps a held rejection as an
// envelope with its Reason (up to 4 KB, saga/budget.go maxReasonLen), and
// saga/budget.go engine.encode refuses a held step over the budget, which
// saga/run.go handleRecords turns into a dead letter of the record. Hold
// rejections by reference (command ID and sending record; the reason is in
// the aggregate's stream), or bound them by count and stop the record's
// sending (retry later) instead of dead-lettering it.
func TestReviewRejectionsHeldBehindAParkedMessageAreNotLost(t *testing.T) {
	ctx := edgeContext(t)
	const commands = 200
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		switch e.Text {
		case "poison":
			return errors.New("the handler fails on poison")
		case "send":
			for i := range commands {
				out.Send(edgeCharge{Account: "strict-" + strconv.Itoa(i), Ref: strconv.Itoa(i)})
			}
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	strict, err := aggregate.NewType[longRejecter]("strict", aggregate.Options[longRejecter]{},
		aggregate.Handles(func(r *longRejecter, _ context.Context, _ edgeCharge) ([]any, error) { return r.reject() }),
		aggregate.Handles(func(r *longRejecter, _ context.Context, _ edgeNotify) ([]any, error) { return r.reject() }))
	require.NoError(t, err)
	bus := command.New(g.store, g.reg, command.Options{})
	require.NoError(t, command.Route[edgeCharge](bus, strict))
	require.NoError(t, command.Route[edgeNotify](bus, strict))
	r, err := saga.NewRunner(g.typ, g.store, bus, saga.RunnerOptions{Clock: g.clock, Checkpoints: g.cps, Logger: testLogger(t),
		Retry: retry.Policy{Attempts: 1, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	longRejections.Store(0)

	require.Equal(t, saga.Handled, edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "send"}))
	require.Equal(t, saga.Parked, edgeDeliver(t, r, "s", 1, edgeEvent{ID: "1", Text: "poison"}))
	require.NoError(t, r.CatchUp(ctx), "the outbox sends the commands; their rejections wait behind the parked message")
	x := edgeExplain(t, r, "1")
	t.Logf("after the outbox: %d commands decided by their aggregates, %d rejections held", longRejections.Load(), len(x.Held))

	require.NotNil(t, x.Parked)
	require.NoError(t, r.Skip(ctx, "1", x.Parked.ID))
	require.NoError(t, r.CatchUp(ctx))
	assert.EqualValues(t, commands, longRejections.Load(), "every command of the step was sent")
	rejected := 0
	for _, s := range edgeSeen(t, r, "1") {
		if strings.HasPrefix(s, "rejected:") {
			rejected++
		}
	}
	assert.Equal(t, commands, rejected, "every rejection reached the instance once")
}
