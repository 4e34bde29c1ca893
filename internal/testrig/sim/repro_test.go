package sim

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Minimal reproductions of engine bugs the tab workload found, on the
// public API; each failed before its fix.

// reproRig is two processes of the tab code (version 2) on one memory
// store and one set of checkpoints: production's runner and an operator's.
type reproRig struct {
	ctx        context.Context
	clock      *sagatest.Clock
	mem        *memory.Store
	code       *tabCode
	prod, oper *saga.Runner[Tab]
}

func newReproRig(t *testing.T) *reproRig {
	t.Helper()
	g := &reproRig{ctx: context.Background(), clock: sagatest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)), mem: memory.New()}
	checkpoints := memory.New()
	runner := func(opts saga.RunnerOptions) *saga.Runner[Tab] {
		code, err := newTabCode(2, false)
		require.NoError(t, err)
		bus, err := code.bus(g.mem, command.Options{})
		require.NoError(t, err)
		opts.Clock, opts.Checkpoints = g.clock, checkpoints
		r, err := saga.NewRunner(code.typ, g.mem, bus, opts)
		require.NoError(t, err)
		return r
	}
	var err error
	g.code, err = newTabCode(2, false)
	require.NoError(t, err)
	g.prod, g.oper = runner(saga.RunnerOptions{}), runner(saga.RunnerOptions{NoCache: true})
	return g
}

// open stores tab id's opening event and has production handle it.
func (g *reproRig) open(t *testing.T, id string) {
	t.Helper()
	data, err := g.code.reg.Encode(TabOpened{Tab: id, Close: "a-" + id})
	require.NoError(t, err)
	data.ID = uuid.New()
	_, err = g.mem.Append(g.ctx, feedStream(id), eventstore.NoStream, data)
	require.NoError(t, err)
	for ev, err := range g.mem.ReadStream(g.ctx, feedStream(id), eventstore.Forward(0)) {
		require.NoError(t, err)
		out, err := g.prod.HandleStored(g.ctx, ev)
		require.NoError(t, err)
		require.Equal(t, saga.Handled, out)
	}
}

// TestReproRedriveRearmsADeadlineAnotherRunnerFiresEarly: tab seeds 12
// and 15. Production handles a ping, which arms "ack" for 5 minutes; its
// index holds the deadline at that time. The deadline is overdue (the
// scheduler has not run yet) when an operator's process re-drives the
// instance from the ping's step: the re-run step arms "ack" again, 5
// minutes from now, under the same deadline ID (IDs derive from the
// message, so a re-run keeps them). Production's index still has the old
// time; its FireDue fires the deadline at once, though the instance's
// record says it is due 5 minutes later: the firing step checks that the
// record holds the deadline's ID, not that the record's deadline is due
// (saga/decide.go, decide, case kindDeadline). Promise: a deadline never
// fires before it is due (docs/sagas.md); the index learns the record's
// time, and the deadline fires then.
func TestReproRedriveRearmsADeadlineAnotherRunnerFiresEarly(t *testing.T) {
	g := newReproRig(t)
	g.open(t, "t1")
	out, err := g.prod.Deliver(g.ctx, saga.Delivery{Source: "scan-a", Sequence: 0, ID: uuid.New(), Event: TabPing{Tab: "t1", Source: "scan-a", Seq: 0}})
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)

	g.clock.Advance(6 * time.Minute) // the ack is overdue; production's scheduler has not run
	redriven, err := g.oper.Redrive(g.ctx, "t1", 1)
	n := redriven.Messages
	require.NoError(t, err)
	require.Equal(t, 1, n, "the ping runs again")
	x, err := g.oper.Explain(g.ctx, "t1")
	require.NoError(t, err)
	var ack saga.Deadline
	for _, d := range x.Deadlines {
		if d.Name == "ack" {
			ack = d
		}
	}
	require.Equal(t, g.clock.Now().Add(tabAck), ack.At, "the re-run step armed ack 5 minutes from now")

	_, err = g.prod.FireDue(g.ctx)
	require.NoError(t, err)
	x, err = g.oper.Explain(g.ctx, "t1")
	require.NoError(t, err)
	assert.Empty(t, x.State.Problems, "no deadline fires before it is due")
	assert.Contains(t, x.Deadlines, ack, "ack is still pending")

	g.clock.Advance(tabAck)
	fired, err := g.prod.FireDue(g.ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fired, "ack fires at its record's time")
	x, err = g.oper.Explain(g.ctx, "t1")
	require.NoError(t, err)
	assert.NotContains(t, x.Deadlines, ack)
	assert.Empty(t, x.State.Problems)
}
