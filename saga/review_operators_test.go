package saga_test

// Adversarial review of the saga rewrite (issue 20): operator actions.
// DESIGN "Operator actions are conditional on what the operator saw";
// saga/operate.go: "each refuses with a [*StaleError], changing nothing,
// when the instance no longer has it so: another operator acted first, or
// the instance moved on". The rig is edges_lost_test.go's.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// TestReviewRetryThroughARunnerWithAnOlderCacheIsNotStale: the operator's
// runner (the CLI, or another production process) cached the instance
// before another process parked a message on it. Retry reads the store,
// sees the message parked as the operator named it, and then decides the
// step on the cached record, where nothing is parked: it refuses with a
// StaleError that says "nothing" is parked, though the message is parked,
// and keeps refusing on every call, so the operator cannot retry through
// that runner at all. Promise (Runner.Retry: a StaleError only "when the
// instance no longer has it so"; ParkedMessage.ID: "pass it to
// Runner.Retry ... which act only while that message is the one parked").
// The cause: saga/decide.go engine.decide returns e.stale as a store error
// (the fourth result) from a cached instance, and engine.step returns it
// without reloading (it reloads only for a nil record from the cache);
// Runner.Retry (saga/operate.go) checked the parked message on a fresh
// read but steps on engine.load's cached copy.
func TestReviewRetryThroughARunnerWithAnOlderCacheIsNotStale(t *testing.T) {
	ctx := edgeContext(t)
	var fixed atomic.Bool
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "P" && !fixed.Load() {
			return errors.New("P fails until it is fixed")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	production := g.runner(t, nil, saga.RunnerOptions{})
	operator := g.runner(t, nil, saga.RunnerOptions{}) // a cache, as by default
	require.Equal(t, saga.Handled, edgeDeliver(t, operator, "s", 0, edgeEvent{ID: "1", Text: "start"}), "the operator's runner caches the instance")
	require.Equal(t, saga.Parked, edgeDeliver(t, production, "s", 1, edgeEvent{ID: "1", Text: "P"}), "another process parks P")
	fixed.Store(true)

	p := edgeExplain(t, operator, "1").Parked
	require.NotNil(t, p, "the operator sees P parked")
	for attempt := 1; attempt <= 2; attempt++ {
		out, err := operator.Retry(ctx, "1", p.ID)
		assert.NoError(t, err, "attempt %d: P is the parked message, as the operator named it", attempt)
		if err == nil {
			assert.Equal(t, saga.Handled, out)
			break
		}
	}
	assert.Equal(t, []string{"start", "P"}, edgeSeen(t, operator, "1"))
}

// TestReviewReleaseOfAGapThatFilledIsStale: the operator saw a gap (Gaps,
// WaitsFor 1); before the Release, the missing message arrived and the
// held one was handled. Release then reports an InvalidArgumentError ("has
// no message held"), as for a source the operator mistyped, not the
// StaleError its doc promises for exactly this case. Promise (Runner.Release:
// "a gap that no longer waits for waitsFor (it filled, or was released) a
// [*StaleError]"). The cause: saga/operate.go Runner.Release checks "no
// message held in source" before the stale check, and a gap that filled
// (or was released) has, once drained, nothing held.
func TestReviewReleaseOfAGapThatFilledIsStale(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{})
	require.Equal(t, saga.Handled, edgeDeliver(t, r, "s", 0, edgeEvent{ID: "1", Text: "start"}))
	require.Equal(t, saga.Held, edgeDeliver(t, r, "s", 2, edgeEvent{ID: "1", Text: "two"}))
	gaps := r.Gaps()
	require.Len(t, gaps, 1)
	require.Equal(t, uint64(1), gaps[0].WaitsFor, "the operator sees the gap at #1")

	require.Equal(t, saga.Handled, edgeDeliver(t, r, "s", 1, edgeEvent{ID: "1", Text: "one"}), "the gap fills")
	require.Equal(t, []string{"start", "one", "two"}, edgeSeen(t, r, "1"))

	err := r.Release(ctx, "1", "s", gaps[0].WaitsFor)
	var bad *eventstore.InvalidArgumentError
	assert.False(t, errors.As(err, &bad), "not an invalid argument: the source and the gap were right when seen: %v", err)
	assert.ErrorIs(t, err, saga.ErrStale, "a gap that filled is stale")
}
