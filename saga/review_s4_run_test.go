package saga_test

// Review s4: Runner.Run returns nil when its context ends, and its own
// failures otherwise.

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
)

var errS4Disk = errors.New("s4: the store's disk failed")

// s4FailingStore fails the subscription check's read (the latest record of
// the saga's subscription stream, read backward) while armed, after
// calling before: the store fails on its own, and the caller's context may
// end right after.
type s4FailingStore struct {
	*memory.Store
	armed  atomic.Bool
	before func()
}

func (s *s4FailingStore) ReadStream(ctx context.Context, name string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	if !opts.Backward || !s.armed.Load() {
		return s.Store.ReadStream(ctx, name, opts)
	}
	return func(yield func(eventstore.Event, error) bool) {
		if s.before != nil {
			s.before()
		}
		yield(eventstore.Event{}, errS4Disk)
	}
}

func s4Runner(t *testing.T) (*saga.Runner[Sale], *s4FailingStore) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	store := &s4FailingStore{Store: mem}
	reg := testRegistry(t)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(store, reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	require.NoError(t, command.Route[MakePayment](bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](bus, orders))
	r, err := saga.NewRunner(saleType(t, reg), store, bus,
		saga.RunnerOptions{Checkpoints: memory.New(), Logger: testLogger(t)})
	require.NoError(t, err)
	return r, store
}

// A store failure of its own while Run starts is Run's failure: returned
// by Run and by CatchUp.
func TestReviewS4RunReturnsAStoreFailureWhileStarting(t *testing.T) {
	r, store := s4Runner(t)
	store.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.ErrorIs(t, r.CatchUp(ctx), errS4Disk)
	assert.ErrorIs(t, r.Run(ctx), errS4Disk)
}

// The store fails on its own while Run checks its subscription, and the
// caller's context ends just after (a shutdown that comes a moment later).
// The failure was not caused by the context: Run's own failures are
// returned ("returns only its own failures"), as Run returns a failure of
// its consumers that came before the caller's cancel. Run returns nil.
func TestReviewS4RunKeepsAStartingFailureTheCallerCancelsAfter(t *testing.T) {
	r, store := s4Runner(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store.before = cancel // the failure happens, then the caller cancels
	store.armed.Store(true)
	err := r.Run(ctx)
	assert.ErrorIs(t, err, errS4Disk, "a store failure, not caused by the context, is reported as %v", err)
}

// A context that ends past a deadline with a cause of its own, or whose
// cause is one of the store's sentinels, is the caller's end: nil, never a
// ctx error, and Run does not hang.
func TestReviewS4RunEndsWithTheCallersContextHoweverCaused(t *testing.T) {
	r, _ := s4Runner(t)
	for name, mk := range map[string]func() (context.Context, context.CancelFunc){
		"deadline with a cause": func() (context.Context, context.CancelFunc) {
			return context.WithDeadlineCause(context.Background(), time.Now().Add(30*time.Millisecond), errors.New("budget spent"))
		},
		"cause a store sentinel": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(30*time.Millisecond, func() { cancel(eventstore.ErrClosed) })
			return ctx, func() { cancel(nil) }
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := mk()
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
		})
	}
}
