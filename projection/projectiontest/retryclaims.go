package projectiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// testRetryHandlerErrorsStayHandlerErrors: a handler's own error is the
// handler's, whatever it wraps. One that wraps a store sentinel the
// consumer also meets on its claims (a moved checkpoint, a fence, a lost
// lease: a read model in another store says so) is parked after its
// attempts like any other failure, and a retry that fails on it runs the
// handler once and reports a handler failure, not a refused claim that it
// retries a hundred times.
func testRetryHandlerErrorsStayHandlerErrors[Tx any](t testing.TB, h Harness[Tx]) {
	for _, sentinel := range []error{eventstore.ErrCheckpointMoved, eventstore.ErrFenced, eventstore.ErrLeaseLost} {
		check.Run(t, sentinel.Error(), func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			var runs atomic.Int32
			fail := func(n int) error {
				if n != 5 {
					return nil
				}
				runs.Add(1)
				return fmt.Errorf("the read model refused item 5: %w", sentinel)
			}
			c, err := projection.NewTx("retry-sentinel", st.Events, Registry(t), st.Consumers, countingTx(h, fail),
				projection.Options{BatchSize: 4, Retry: fastRetry, Logger: quiet()})
			check.NoError(t, err)
			check.NoError(t, c.CatchUp(ctx), "a handler error that wraps %v stopped the consumer", sentinel)
			letters := collectLetters(t, c)
			check.Len(t, letters, 1, "item 5 was not parked")
			runs.Store(0)

			err = c.RetryDeadLetter(ctx, letters[0].ID)
			check.ErrorIs(t, err, projection.ErrHandlerFailed)
			check.True(t, !errors.Is(err, projection.ErrRetryRefused), "got %v", err)
			check.Equal(t, runs.Load(), int32(1), "the failed retry ran the handler more than once")
			after := collectLetters(t, c)
			check.Len(t, after, 1)
			check.Equal(t, after[0].Attempts, letters[0].Attempts+1)
			check.Equal(t, h.Get(t, st, totalKey), int64(9))
		})
	}
}

// testConcurrentRetriesApplyOnce: two retries of one dead letter at once
// (two operators, or one admin request sent twice) apply its event once,
// for a plain consumer and for a transactional one whose dead letters live
// in another store, which cannot resolve them in the effect's transaction.
// The second retry starts while the first one's handler runs.
func testConcurrentRetriesApplyOnce[Tx any](t testing.TB, h Harness[Tx]) {
	for _, mode := range []string{"plain", "transactional, foreign dead letters"} {
		check.Run(t, mode, func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			fail := newFailOn(5)
			var (
				inner     sync.Once
				innerDone = make(chan error, 1)
				c         *projection.Consumer
			)
			// While the first retry's handler runs item 5, a second retry of
			// the same dead letter starts; the first waits a while for it
			// (it may be waiting for the first's transaction) and goes on.
			during := func(n int) error {
				if err := fail.check(n); err != nil || n != 5 || c == nil {
					return err
				}
				inner.Do(func() {
					id := collectLetters(t, c)[0].ID
					go func() { innerDone <- c.RetryDeadLetter(ctx, id) }()
					select {
					case err := <-innerDone:
						innerDone <- err
					case <-time.After(200 * time.Millisecond):
					}
				})
				return nil
			}
			got := newSeen()
			count := counter(t, h, st, got, mode == "plain")
			opts := projection.Options{BatchSize: 4, Retry: fastRetry, Logger: quiet()}
			var err error
			if mode == "plain" {
				c, err = projection.New("retry-twice", st.Events, Registry(t), st.Consumers, plainCounter(got, during), opts)
			} else {
				opts.DeadLetters = h.New(t).Consumers
				c, err = projection.NewTx("retry-twice", st.Events, Registry(t), st.Consumers, countingTx(h, during), opts)
			}
			check.NoError(t, err)
			consumer := c
			c = nil // no second retry while the consumer first meets item 5
			check.NoError(t, consumer.CatchUp(ctx))
			letters := collectLetters(t, consumer)
			check.Len(t, letters, 1)
			fail.on.Store(false)
			c = consumer

			first := c.RetryDeadLetter(ctx, letters[0].ID)
			second := <-innerDone
			check.Equal(t, count(5), int64(1), "two concurrent retries applied item 5 %d times (first: %v, second: %v)", count(5), first, second)
			errs := []error{first, second}
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
					continue
				}
				check.True(t, errors.Is(err, projection.ErrRetryRefused) || errors.Is(err, eventstore.ErrDeadLetterNotFound),
					"the losing retry's error says neither that it was refused nor that the dead letter is gone: %v", err)
			}
			check.Equal(t, ok, 1, "retries that succeeded: first %v, second %v", first, second)
			check.Len(t, collectLetters(t, c), 0)
		})
	}
}

// skipBesideResolve is a consumer store whose transactions, when they
// resolve the dead letter an earlier session left, let an operator skip
// that dead letter before they commit: the skip may wait for the
// transaction, so it runs beside it, given a while before the commit.
type skipBesideResolve[Tx any] struct {
	ConsumerStore[Tx]
	once    sync.Once
	skipped chan error
}

func (s *skipBesideResolve[Tx]) DeleteDeadLetterTx(ctx context.Context, tx Tx, consumer, id string) error {
	err := s.ConsumerStore.DeleteDeadLetterTx(ctx, tx, consumer, id)
	s.once.Do(func() {
		go func() { s.skipped <- s.ConsumerStore.DeleteDeadLetter(context.Background(), consumer, id) }()
		select {
		case err := <-s.skipped:
			s.skipped <- err
		case <-time.After(100 * time.Millisecond):
		}
	})
	return err
}

// testSkipBesideResolve: an operator skips a dead letter while the
// consumer handles its event again in order (it parked it, then stopped
// before its checkpoint passed it) and resolves it in the same
// transaction. One of the two deletes it; neither fails the other's work,
// and the consumer goes on: the event is applied once.
func testSkipBesideResolve[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	var item5 eventstore.Event
	for ev, err := range st.Events.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		check.NoError(t, err)
		if ev.Version == 6 {
			item5 = ev
		}
	}
	check.Equal(t, item5.Version, uint64(6))
	// What a session that parked item 5 and stopped before its checkpoint
	// moved leaves behind.
	now := time.Now().UTC()
	parked, err := st.Consumers.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: "skip-beside", Event: item5,
		Error: "refused", Attempts: 3, FirstFailure: now, LastFailure: now})
	check.NoError(t, err)

	store := &skipBesideResolve[Tx]{ConsumerStore: st.Consumers, skipped: make(chan error, 1)}
	c, err := projection.NewTx("skip-beside", st.Events, Registry(t), store, countingTx(h, nil),
		projection.Options{BatchSize: 4, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx), "a skip beside the transaction that resolves the same dead letter stopped the consumer")
	skip := <-store.skipped
	if skip != nil {
		check.ErrorIs(t, skip, eventstore.ErrDeadLetterNotFound, "the skip that lost to the resolving transaction")
	}
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1))
	check.Equal(t, h.Get(t, st, totalKey), int64(10))
	_, err = st.Consumers.DeadLetter(ctx, "skip-beside", parked.ID)
	check.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
}

// testRetryKeepsItsLease: a retry with no Run of the consumer in its
// process takes the lease for itself, and keeps it while its handler runs
// longer than the lease's TTL: no other process takes the consumer over
// meanwhile. The other process asks from beside the handler, never from
// inside it: on SQLite its request waits for the writer that the retry's
// transaction holds, and what it gets after the commit does not count.
func testRetryKeepsItsLease[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	fail := newFailOn(5)
	const ttl = 300 * time.Millisecond
	var (
		retrying atomic.Bool
		ended    atomic.Bool
		taken    atomic.Bool
		asked    sync.WaitGroup
	)
	other := func(stop <-chan struct{}) {
		defer asked.Done()
		for {
			l, ok, err := st.Consumers.AcquireLease(ctx, "retry-keeps", "other", ttl)
			if err == nil && ok {
				if !ended.Load() {
					taken.Store(true)
				}
				_ = st.Consumers.ReleaseLease(ctx, l)
			}
			select {
			case <-stop:
				return
			case <-time.After(ttl / 10):
			}
		}
	}
	slow := func(n int) error {
		if err := fail.check(n); err != nil || n != 5 || !retrying.Load() {
			return err
		}
		// The handler runs three TTLs; another process keeps asking for
		// the lease meanwhile.
		stop := make(chan struct{})
		asked.Add(1)
		go other(stop)
		time.Sleep(3 * ttl)
		ended.Store(true)
		close(stop)
		return nil
	}
	c, err := projection.NewTx("retry-keeps", st.Events, Registry(t), st.Consumers, countingTx(h, slow), projection.Options{
		BatchSize: 4, Retry: fastRetry, Leases: st.Consumers, LeaseTTL: ttl, Holder: "A", Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	letters := collectLetters(t, c)
	check.Len(t, letters, 1)
	fail.on.Store(false)
	retrying.Store(true)
	check.NoError(t, c.RetryDeadLetter(ctx, letters[0].ID))
	asked.Wait()
	check.True(t, !taken.Load(), "another process took the lease while the retry that held it ran")
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1))
}
