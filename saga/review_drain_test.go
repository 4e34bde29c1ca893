package saga_test

// Adversarial review of the saga rewrite (issue 20): pending sources and
// the drains that read them again. Progress.Pending (saga/progress.go):
// "Every later event of the source waits behind them, so none overtakes an
// earlier one"; DESIGN "Operator actions ... whatever they unblock is
// crash-safe"; HandleStored: "when HandleStored returns nil the outcome is
// durable". The rig is edges_lost_test.go's.

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// hookStore runs a hook after an append to, or a read of, a stream (each
// once), so that a test can interleave two processes at a chosen point.
type hookStore struct {
	eventstore.Store
	mu          sync.Mutex
	afterAppend map[string]func()
	afterRead   map[string]func()
}

func newHookStore(s eventstore.Store) *hookStore {
	return &hookStore{Store: s, afterAppend: map[string]func(){}, afterRead: map[string]func(){}}
}

func (s *hookStore) take(m map[string]func(), stream string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn := m[stream]
	delete(m, stream)
	return fn
}

func (s *hookStore) onAppend(stream string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterAppend[stream] = fn
}

func (s *hookStore) onRead(stream string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterRead[stream] = fn
}

func (s *hookStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, events...)
	if err == nil {
		if fn := s.take(s.afterAppend, stream); fn != nil {
			fn()
		}
	}
	return res, err
}

func (s *hookStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	inner := s.Store.ReadStream(ctx, stream, opts)
	return func(yield func(eventstore.Event, error) bool) {
		defer func() {
			if fn := s.take(s.afterRead, stream); fn != nil {
				fn()
			}
		}()
		for ev, err := range inner {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// TestReviewEventHeldWhileAnOperatorsDrainReadsItsStreamIsNotLost: the
// operator skips a parked event; the drain that follows reads the pending
// stream, finds the one held event there and takes it as the stream's last
// one. Meanwhile the stream gets a new event for the instance, which the
// production runner's subscription hands over (HandleStored): the
// instance's stream is pending, so it is held behind (stored; HandleStored
// returns Held, nil, and the subscription moves on). The operator's step
// then loses its append to that hold, reloads, and decides the same
// message again, still "last", which ends the stream's waiting; the
// production runner's own drain, which read the stream before that step,
// loses its append in turn and finds nothing pending any more. The new
// event is neither handled, held nor pending: lost, and the outbox's resume
// of the hold's record (c02af1f) does not find it either. Promise
// (progress.Pending; HandleStored: nil means the outcome is durable).
// The cause: saga/drain.go engine.nextPending decides "last" from one read,
// and saga/decide.go decision.take clears Pending for msg.last on a record
// that engine.step reloaded after a conflict, though the conflicting step
// (a hold) said more may wait. Clear Pending only when the reloaded record
// is the one the read was made on (or re-read the source after a
// conflict; a step that holds behind a pending source could also record
// the highest held version, which a "last" below it must not pass).
func TestReviewEventHeldWhileAnOperatorsDrainReadsItsStreamIsNotLost(t *testing.T) {
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "poison" {
			return errors.New("the handler fails on poison")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	opStore, prodStore := newHookStore(g.store), newHookStore(g.store)
	operator := g.runner(t, opStore, saga.RunnerOptions{})
	production := g.runner(t, prodStore, saga.RunnerOptions{NoCache: true})
	for _, text := range []string{"start", "poison", "held"} {
		out, err := production.HandleStored(ctx, g.put(t, "src-1", edgeEvent{ID: "1", Text: text}))
		require.NoError(t, err)
		t.Logf("%s: %s", text, out)
	}
	x := edgeExplain(t, operator, "1")
	require.NotNil(t, x.Parked)
	require.Equal(t, map[string]uint64{"src-1": 1}, x.Pending)

	stream := g.typ.Stream("1")
	held := make(chan struct{})
	resume := make(chan struct{})
	done := make(chan error, 1)
	var heldOut saga.Outcome
	opStore.onRead("src-1", func() {
		// The operator's drain has read src-1 (the held event is the last
		// one). The stream gets a new event; production's subscription
		// hands it over, and its hold is stored; production's own drain
		// then reads src-1 and waits until the operator's step is stored.
		late := g.put(t, "src-1", edgeEvent{ID: "1", Text: "late"})
		prodStore.onAppend(stream, func() { close(held) })
		prodStore.onRead("src-1", func() { <-resume })
		go func() {
			var err error
			heldOut, err = production.HandleStored(ctx, late)
			done <- err
		}()
		<-held
	})
	require.NoError(t, operator.Skip(ctx, "1", x.Parked.ID), "the operator skips the poison")
	close(resume)
	require.NoError(t, <-done)
	t.Logf("the late event: %s", heldOut)
	require.Equal(t, saga.Held, heldOut, "the late event was held behind the pending stream, durably")

	// The outbox reads every record, as it would after these steps.
	for ev, err := range g.store.ReadStream(ctx, stream, eventstore.Forward(0)) {
		require.NoError(t, err)
		require.NoError(t, production.SendStored(ctx, ev))
	}
	for _, s := range edgeHistory(t, production, "1") {
		t.Logf("step %d: %s #%d of %q", s.Version, s.Kind, s.Sequence, s.Source)
	}
	x = edgeExplain(t, production, "1")
	t.Logf("seen %v, pending %v, watermarks %v, held %d", x.State.Seen, x.Pending, x.Watermarks, len(x.Held))
	assert.Equal(t, []string{"start", "held", "late"}, x.State.Seen,
		"the late event is handled, once, after the held one (or still waits: pending %v)", x.Pending)
}
