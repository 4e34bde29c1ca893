package saga_test

// Adversarial review of the saga rewrite (issue 20): command identity
// under Redrive and the bus's CommandIDReusedError. saga/ids.go: "A
// handler fixed and re-run by [Runner.Redrive] that adds, drops or
// reorders commands keeps the IDs of those it still sends"; DESIGN
// "Identity from meaning, not position". The rig is edges_lost_test.go's.

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/upcast"
)

// TestReviewRedriveWithAnAddedCommandOfTheSameTypeAndTarget: edge 8 with
// the added command of the same type and to the same aggregate as the old
// one (a second charge on the same account, say a fee). A command's ID
// comes from its type and target and its ordinal among the step's commands
// of that type and target, not from its payload (a fix that corrects a
// charge's amount must keep the charge's ID, or the fixed charge would be
// made beside the wrong one): so an added charge keeps every earlier
// charge's ID when it is sent after them, as here, and would take the
// first one's when sent before it (ids.go, Output.Send and Runner.Redrive
// say so). (The review found the promise stated without that limit.)
func TestReviewRedriveWithAnAddedCommandOfTheSameTypeAndTarget(t *testing.T) {
	ctx := edgeContext(t)
	var fixed atomic.Bool
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		out.Send(edgeCharge{Account: "acct", Ref: "order"})
		if fixed.Load() {
			out.Send(edgeCharge{Account: "acct", Ref: "fee"}) // the fix: a fee, after the order's charge
		}
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, r.CatchUp(ctx))
	require.Equal(t, 1, g.account(t, "acct").Charges["order"])

	fixed.Store(true)
	_, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))
	acct := g.account(t, "acct")
	assert.Equal(t, 1, acct.Charges["order"], "the order charge the first run made is absorbed, not made again")
	assert.Equal(t, 1, acct.Charges["fee"], "the added fee is applied, not answered as the order charge's duplicate")
}

// renamedRig is g's code after a deploy that renamed the codec name of
// edgeCharge from "edge.charge" to "billing.charge", with the upcaster
// (upcast.Rename) that docs/upcasting.md prescribes, so that the recorded
// commands still decode. Everything else is as in edgeRig.build.
func renamedRig(t *testing.T, g *edgeRig) *edgeRig {
	s := &edgeRig{store: g.store, cps: g.cps, clock: g.clock}
	s.reg = codec.NewRegistry(codec.Options{})
	for _, err := range []error{
		codec.Register[edgeState](s.reg, "edge.state", 1),
		codec.Register[edgeEvent](s.reg, "edge.event", 1),
		codec.Register[edgeAny](s.reg, "edge.any", 1),
		codec.Register[edgeDue](s.reg, "edge.due", 1),
		codec.Register[edgeNotify](s.reg, "edge.notify", 1),
		codec.Register[edgeCharged](s.reg, "edge.charged", 1),
		codec.Register[edgeNotified](s.reg, "edge.notified", 1),
		codec.Register[edgeCharge](s.reg, "billing.charge", 1),
		s.reg.Upcast(upcast.Rename("edge.charge", 1, "billing.charge", 1)),
	} {
		require.NoError(t, err)
	}
	typ, err := saga.New[edgeState]("edge", s.reg, saga.Options[edgeState]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(typ, saga.Event[edgeState, edgeEvent]{Starts: true,
		Instance: func(e edgeEvent, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, st *edgeState, e edgeEvent, out *saga.Output) error {
			st.Seen = append(st.Seen, e.Text)
			out.Send(edgeCharge{Account: "acct", Ref: "order"})
			return nil
		}}))
	require.NoError(t, saga.Sends[edgeState, edgeCharge](typ))
	s.typ = typ
	accounts, err := aggregate.NewType[edgeAccount]("acct", aggregate.Options[edgeAccount]{}, edgeAccountBindings...)
	require.NoError(t, err)
	s.bus = command.New(s.store, s.reg, command.Options{})
	require.NoError(t, command.Route[edgeCharge](s.bus, accounts))
	s.accounts, err = aggregate.NewRepository(s.store, s.reg, accounts, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return s
}

// edgeOrderHooks sends one charge per event, as renamedRig's code does.
var edgeOrderHooks = edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
	s.Seen = append(s.Seen, e.Text)
	out.Send(edgeCharge{Account: "acct", Ref: "order"})
	return nil
}}

// TestReviewRedriveAfterACommandTypeRenameAppliesItOnce: the command's ID
// derives from its codec type name, which upcast.Rename changes: after a
// deploy that renames the command type (the recorded commands still decode,
// through the rename), Redrive re-runs the step, the same command gets
// another ID, and the bus applies it a second time (a charge made twice).
// Promise (Runner.Redrive: "Commands keep their IDs ... so the bus absorbs
// a command the first run already carried out"). The cause: saga/ids.go
// commandID takes raw.Type, the current codec name (saga/handle.go
// engine.commands), not a name stable across renames. Use the root of the
// type's rename chain (the oldest stored name that upcasts to it), or key
// the ID on something the rename does not change.
func TestReviewRedriveAfterACommandTypeRenameAppliesItOnce(t *testing.T) {
	ctx := edgeContext(t)
	old := newEdgeRig(t, edgeOnMemory, edgeOrderHooks)
	edgeDeliver(t, old.runner(t, nil, saga.RunnerOptions{}), "s", 0, edgeEvent{ID: "1", Text: "order"})
	require.NoError(t, old.runner(t, nil, saga.RunnerOptions{}).CatchUp(ctx))
	require.Equal(t, 1, old.account(t, "acct").Charges["order"])

	current := renamedRig(t, old)
	r := current.runner(t, nil, saga.RunnerOptions{})
	_, err := r.Redrive(ctx, "1", 0)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))
	assert.Equal(t, 1, current.account(t, "acct").Charges["order"], "the re-driven step's charge is absorbed by the bus, not made twice")
	assert.Nil(t, edgeExplain(t, r, "1").Parked)
}

// TestReviewResendAfterACommandTypeRenameIsNotRefused: the outbox sent a
// step's command (it applied) and its process stopped before the
// checkpoint moved; the new code, deployed with a rename of the command's
// codec type (and the upcaster), re-sends the record, as the outbox does
// after a crash. The bus compares the type the events recorded
// ("edge.charge") with the type it names now ("billing.charge") and refuses
// the legitimate re-send with a CommandIDReusedError, which the outbox takes
// for a poison command: the instance is parked on its own, already applied,
// command. Promise (saga/outbox.go send: "a re-send after a crash is
// absorbed by the bus's command-ID idempotency"; command.CommandIDReusedError
// is for "a command of another type"). The cause: command/rejection.go
// priorResult compares codec names as strings, and command/bus.go
// Bus.commandType names the current type; a renamed type is the same type.
// Compare through the registry (reg.SourceTypes(current) holds the old
// name).
func TestReviewResendAfterACommandTypeRenameIsNotRefused(t *testing.T) {
	ctx := edgeContext(t)
	old := newEdgeRig(t, edgeOnMemory, edgeOrderHooks)
	oldRunner := old.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, oldRunner, "s", 0, edgeEvent{ID: "1", Text: "order"})
	var rec eventstore.Event
	for ev, err := range old.store.ReadStream(ctx, old.typ.Stream("1"), eventstore.Forward(0)) {
		require.NoError(t, err)
		rec = ev
	}
	require.NoError(t, oldRunner.SendStored(ctx, rec), "the old outbox sends the charge, then its process stops")
	require.Equal(t, 1, old.account(t, "acct").Charges["order"])

	current := renamedRig(t, old)
	r := current.runner(t, nil, saga.RunnerOptions{})
	require.NoError(t, r.SendStored(ctx, rec), "the new outbox sends the record again")
	x := edgeExplain(t, r, "1")
	assert.Nil(t, x.Parked, "the re-send of an applied command is absorbed; the instance is not parked on it")
	if x.Parked != nil {
		t.Logf("parked: %s: %s", x.Parked.Kind, x.Parked.Error)
	}
	assert.Equal(t, 1, current.account(t, "acct").Charges["order"])
}
