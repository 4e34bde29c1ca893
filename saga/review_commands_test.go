package saga_test

// Adversarial review of the saga rewrite (issue 20): poison commands,
// parked as kind "command", and what Skip and Retry promise about them.
// The rig is edges_lost_test.go's.

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// flakyAccount panics in Handle while flakyPoisoned is set (a bug in the
// aggregate, fixed later), and otherwise applies every command, counting
// them.
type flakyAccount struct{}

var (
	flakyPoisoned atomic.Bool
	flakyApplied  atomic.Int64
)

func (flakyAccount) decide(event any) ([]any, error) {
	if flakyPoisoned.Load() {
		panic("the flaky account has a bug")
	}
	flakyApplied.Add(1)
	return []any{event}, nil
}

// flakyBindings decide the edge saga's commands, and apply nothing: the
// account keeps no state.
var flakyBindings = []aggregate.Binding[flakyAccount]{
	aggregate.Handles(func(a *flakyAccount, _ context.Context, c edgeCharge) ([]any, error) { return a.decide(edgeCharged(c)) }),
	aggregate.Handles(func(a *flakyAccount, _ context.Context, c edgeNotify) ([]any, error) {
		return a.decide(edgeNotified(c))
	}),
	aggregate.Applies(func(*flakyAccount, edgeCharged) {}),
	aggregate.Applies(func(*flakyAccount, edgeNotified) {}),
}

// flakyRunner is a runner of g's saga whose commands go to flakyAccount.
func flakyRunner(t *testing.T, g *edgeRig) *saga.Runner[edgeState] {
	flaky, err := aggregate.NewType[flakyAccount]("flaky", aggregate.Options[flakyAccount]{}, flakyBindings...)
	require.NoError(t, err)
	bus := command.New(g.store, g.reg, command.Options{})
	require.NoError(t, command.Route[edgeCharge](bus, flaky))
	require.NoError(t, command.Route[edgeNotify](bus, flaky))
	r, err := saga.NewRunner(g.typ, g.store, bus, saga.RunnerOptions{Clock: g.clock, Checkpoints: g.cps, Logger: testLogger(t),
		Retry: retry.Policy{Attempts: 1, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	flakyPoisoned.Store(false)
	flakyApplied.Store(0)
	return r
}

// TestReviewSkippedCommandIsNeverSentAgain: the outbox parks the instance
// on a command its aggregate keeps failing (it panics); the operator skips
// it ("a skipped command is never sent"). The instance had settled 256
// other commands, sent later, so listing the skipped one drops it from the
// bounded list at once (below the horizon). The aggregate's bug is then
// fixed, and the step record that sent the command is sent again (an
// outbox relay re-sends, as SendStored allows: "Records may be sent
// again"; or a second runner's outbox, without leases, reads it late): the
// skipped command goes out and applies. Promise (Runner.Skip: "a skipped
// command is never sent"; saga/outbox.go send: "a command whose outcome the
// instance took already is not sent again"). The cause: saga/outbox.go
// Runner.send checks only in.rec.Settled.has(c.ID), the bounded list, and
// not engine.isSettled, which asks the history below the horizon (nor does
// saga/operate.go Runner.remaining).
func TestReviewSkippedCommandIsNeverSentAgain(t *testing.T) {
	ctx := edgeContext(t)
	const others = 256
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		switch e.Text {
		case "start":
			out.Send(edgeCharge{Account: "b", Ref: "skipped"})
		case "many":
			for i := range others {
				out.Send(edgeNotify{Account: "n" + strconv.Itoa(i), Ref: strconv.Itoa(i)})
			}
		}
		return nil
	}})
	r := flakyRunner(t, g)
	edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "start"})
	edgeDeliver(t, r, "s", 1, edgeEvent{ID: "1", Text: "many"})
	var start eventstore.Event
	for ev, err := range g.store.ReadStream(ctx, g.typ.Stream("1"), eventstore.Forward(0)) {
		require.NoError(t, err)
		start = ev
		break
	}
	for _, s := range edgeHistory(t, r, "1") {
		if s.Version != 1 {
			continue
		}
		for _, c := range s.Commands {
			out, err := r.Reject(ctx, "1", c.ID, errors.New("declined elsewhere"))
			require.NoError(t, err)
			require.Equal(t, saga.Handled, out)
		}
	}

	flakyPoisoned.Store(true)
	require.NoError(t, r.SendStored(ctx, start), "the outbox sends the start's charge; the aggregate panics")
	x := edgeExplain(t, r, "1")
	require.NotNil(t, x.Parked)
	require.Equal(t, "command", x.Parked.Kind)
	require.NoError(t, r.Skip(ctx, "1", x.Parked.ID), "the operator skips the poison command")

	flakyPoisoned.Store(false) // the aggregate's bug is fixed
	require.NoError(t, r.SendStored(ctx, start), "the start's record is sent again")
	assert.Zero(t, flakyApplied.Load(), "the skipped command was never sent")
	assert.Nil(t, edgeExplain(t, r, "1").Parked)
}

// TestReviewPoisonCommandOfACompletedInstanceDoesNotDropTheOthers: a step
// sends two commands, a poison one first (its aggregate panics) and a good
// one; the next step completes the instance before the outbox sends them.
// The outbox sends the poison command, the bus keeps failing it, and its
// failure is fed back to the instance, which, complete, ignores it; the
// outbox then stops sending the record, as if the instance were parked on
// the command: the good command is never sent, and nothing shows it (the
// instance is not parked, Explain lists nothing unsent once the outbox has
// passed). Promise (Output.Send: "The outbox dispatches it after the step is
// stored"; Output.Complete ignores only the rejections of commands sent by
// earlier steps, not their sending). The fix: a command that fails for good
// is no answer but an incident, and parks its instance, complete or not;
// the step's other commands wait behind it, and go out once an operator
// retries or skips it.
func TestReviewPoisonCommandOfACompletedInstanceDoesNotDropTheOthers(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		switch e.Text {
		case "send":
			out.Send(edgeCharge{Account: "panic-c", Ref: "poison"})
			out.Send(edgeNotify{Account: "good-c", Ref: "receipt"})
		case "finish":
			out.Complete()
		}
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "send"})
	edgeDeliver(t, r, "s", 1, edgeEvent{ID: "1", Text: "finish"})
	require.NoError(t, r.CatchUp(ctx))
	x := edgeExplain(t, r, "1")
	require.True(t, x.Completed)
	require.NotNil(t, x.Parked, "the completed instance is parked on the command that failed")
	assert.Equal(t, "command", x.Parked.Kind)
	assert.Zero(t, g.account(t, "good-c").Notices["receipt"], "the step's next command waits behind it")
	require.NoError(t, r.Skip(ctx, "1", x.Parked.ID))
	require.NoError(t, r.CatchUp(ctx))
	assert.Equal(t, 1, g.account(t, "good-c").Notices["receipt"], "the step's good command is sent once the failed one is skipped")
	assert.Nil(t, edgeExplain(t, r, "1").Parked)
}
