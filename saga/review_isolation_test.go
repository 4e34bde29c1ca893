package saga_test

// Adversarial review of the saga rewrite (issue 20): breaks of the promise
// "Isolate per instance" (DESIGN: "Anything that concerns one instance (a
// handler error, a record the store refuses, corrupt or foreign data, ...)
// parks that instance with a reason; it never stops the runner, the outbox
// or another instance"). The rig is edges_lost_test.go's.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/saga"
)

// TestReviewDamagedInstanceDoesNotStopOtherDeadlines: an instance whose
// deadline was indexed from a good record, and whose latest record was then
// damaged, makes FireDue fail and put every due deadline back, first its
// own: no deadline due after it ever fires, and CatchUp fails on every
// call. Promise (DESIGN "Isolate per instance ... corrupt or foreign data
// ... never stops the runner ... or another instance"; edge 12 covers the
// events consumer and the start-up scan, not the firing of deadlines).
// The cause: FireDue returns the engine's error for the one instance
// (saga/deadlines.go Runner.FireDue) instead of parking or passing over it
// as handleEvents and handleRecords do for instanceProblem errors.
func TestReviewDamagedInstanceDoesNotStopOtherDeadlines(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, out *saga.Output) error {
		s.Seen = append(s.Seen, e.Text)
		d := time.Minute
		if e.ID == "good" {
			d = 2 * time.Minute
		}
		out.ScheduleAfter("due", d, edgeDue{Text: e.ID})
		return nil
	}})
	r := g.runner(t, nil, saga.RunnerOptions{})
	edgeDeliver(t, r, "src-bad", 0, edgeEvent{ID: "bad", Text: "start"})
	edgeDeliver(t, r, "src-good", 0, edgeEvent{ID: "good", Text: "start"})
	require.NoError(t, r.CatchUp(ctx))

	// The latest record of "bad" is damaged (as in edge 12).
	var rec eventstore.Event
	for ev, err := range g.store.ReadStream(ctx, g.typ.Stream("bad"), eventstore.Forward(0)) {
		require.NoError(t, err)
		rec = ev
	}
	_, err := g.store.Append(trusted.Writer(ctx), rec.StreamID, eventstore.Exact(rec.Version),
		eventstore.EventData{Type: rec.Type, SchemaVersion: rec.SchemaVersion, Data: []byte(`{"handled":{"kind":`)})
	require.NoError(t, err)

	g.clock.Advance(3 * time.Minute)
	_, err = r.FireDue(ctx)
	assert.NoError(t, err, "one instance's damaged record does not fail the firing of the others' deadlines")
	_, err = r.FireDue(ctx)
	assert.NoError(t, err, "nor the next call")
	assert.NoError(t, r.CatchUp(ctx), "nor CatchUp")
	assert.Equal(t, []string{"start", "due:good"}, edgeSeen(t, r, "good"), "the other instance's due deadline fired")
}
