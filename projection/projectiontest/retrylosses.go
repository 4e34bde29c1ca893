package projectiontest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// Found by an adversarial review of the retry's claim: each case failed
// before its fix.

// parkItem5 has a transactional consumer of stores st park item 5 of ten,
// and returns the consumer and its dead letter.
func parkItem5[Tx any](t testing.TB, h Harness[Tx], st Stores[Tx], name string, opts projection.Options, during func(ctx context.Context, n int) error) (*projection.Consumer, eventstore.DeadLetter) {
	t.Helper()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	fail := newFailOn(5)
	handler := countingTx(h, nil)
	c, err := projection.NewTx(name, st.Events, Registry(t), st.Consumers, func(ctx context.Context, tx Tx, d codec.Decoded) error {
		if it, ok := d.Value.(Item); ok {
			if err := fail.check(it.N); err != nil {
				return err
			}
			if during != nil {
				if err := during(ctx, it.N); err != nil {
					return err
				}
			}
		}
		return handler(ctx, tx, d)
	}, opts)
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(context.Background()))
	letters := collectLetters(t, c)
	check.Len(t, letters, 1)
	fail.on.Store(false)
	return c, letters[0]
}

// testRetryRefusesADeadLetterClaimedElsewhere: another process's retry
// claims the dead letter and runs. A retry here is refused without running
// its handler or touching the claim, and so is one whose registry cannot
// decode the event (an old deployment beside a new one): that one recorded
// its decoding failure and cleared the claim, and a third retry applied
// the event a second time.
func testRetryRefusesADeadLetterClaimedElsewhere[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	opts := projection.Options{BatchSize: 4, Retry: fastRetry, Logger: quiet()}
	var runs atomic.Int32
	c, d := parkItem5(t, h, st, "retry-claimed", opts, func(_ context.Context, n int) error {
		if n == 5 {
			runs.Add(1)
		}
		return nil
	})
	d.ClaimedUntil = time.Now().Add(time.Minute).UTC()
	claimed, err := st.Consumers.ParkDeadLetter(ctx, d) // the other process's claim
	check.NoError(t, err)

	old, err := projection.NewTx("retry-claimed", st.Events, codec.NewRegistry(codec.Options{}), st.Consumers, countingTx(h, nil), opts)
	check.NoError(t, err)
	for name, retrier := range map[string]*projection.Consumer{"the same code": c, "code that cannot decode the event": old} {
		err := retrier.RetryDeadLetter(ctx, d.ID)
		check.ErrorIs(t, err, projection.ErrRetryRefused, "a retry by %s, of a dead letter another retry claims", name)
		check.True(t, !errors.Is(err, projection.ErrHandlerFailed), "%s: got %v", name, err)
		now, err := st.Consumers.DeadLetter(ctx, "retry-claimed", d.ID)
		check.NoError(t, err)
		check.Equal(t, now.Generation, claimed.Generation, "the refused retry by %s wrote on the dead letter", name)
		check.Within(t, now.ClaimedUntil, claimed.ClaimedUntil, time.Millisecond, "the claim, after the refused retry by %s", name)
		check.Equal(t, now.Attempts, d.Attempts, name)
	}
	check.Equal(t, runs.Load(), 0, "a refused retry ran the handler")
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(0))
}

// losingLeases is a lease store whose renewals find the lease lost.
type losingLeases struct{ storekit.LeaseStore }

func (s losingLeases) RenewLease(_ context.Context, l storekit.Lease, _ time.Duration) (storekit.Lease, error) {
	return storekit.Lease{}, &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
}

// testRetryThatLosesItsLeaseIsRefused: a retry takes the lease for itself
// and loses it while its handler runs; the handler, honouring its
// context, returns ctx.Err(). The retry stops and is refused, records no
// failed attempt and applies nothing. It returned a bare context.Canceled,
// which a caller cannot tell from its own cancel.
func testRetryThatLosesItsLeaseIsRefused[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	opts := projection.Options{BatchSize: 4, Retry: fastRetry, LeaseTTL: 60 * time.Millisecond, Logger: quiet()}
	_, d := parkItem5(t, h, st, "retry-lease-lost", opts, nil)
	opts.Leases = losingLeases{st.Consumers}
	retrier, err := projection.NewTx("retry-lease-lost", st.Events, Registry(t), st.Consumers, func(ctx context.Context, _ Tx, _ codec.Decoded) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("the lease was never lost")
		}
	}, opts)
	check.NoError(t, err)
	err = retrier.RetryDeadLetter(ctx, d.ID)
	check.ErrorIs(t, err, projection.ErrRetryRefused, "a retry whose lease was lost")
	check.True(t, !errors.Is(err, projection.ErrHandlerFailed), "got %v", err)
	check.ErrorIs(t, err, eventstore.ErrLeaseLost)
	now, err := st.Consumers.DeadLetter(ctx, "retry-lease-lost", d.ID)
	check.NoError(t, err)
	check.Equal(t, now.Attempts, d.Attempts, "the lost lease was recorded as a failed attempt: %q", now.Error)
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(0))
}

// claimUntilCancelled is a dead letter store whose claims (a park of a
// dead letter with a claim time) wait until their context ends.
type claimUntilCancelled struct{ storekit.DeadLetterStore }

func (s claimUntilCancelled) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if !d.ClaimedUntil.IsZero() {
		<-ctx.Done()
		return eventstore.DeadLetter{}, ctx.Err()
	}
	return s.DeadLetterStore.ParkDeadLetter(ctx, d)
}

// testRetryThatLosesItsLeaseWhileClaimingIsRefused: the lease taken for a
// retry is lost before the retry has claimed its dead letter (the claim
// waits on a busy store). The retry is refused, naming the lost lease; it
// returned the claim's bare context error, which a caller cannot tell from
// its own cancel (seen under load on SQLite).
func testRetryThatLosesItsLeaseWhileClaimingIsRefused[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	opts := projection.Options{BatchSize: 4, Retry: fastRetry, LeaseTTL: 60 * time.Millisecond, Logger: quiet()}
	_, d := parkItem5(t, h, st, "retry-lease-lost-claiming", opts, nil)
	opts.Leases = losingLeases{st.Consumers}
	opts.DeadLetters = claimUntilCancelled{st.Consumers}
	retrier, err := projection.NewTx("retry-lease-lost-claiming", st.Events, Registry(t), st.Consumers, countingTx(h, nil), opts)
	check.NoError(t, err)
	err = retrier.RetryDeadLetter(ctx, d.ID)
	check.ErrorIs(t, err, projection.ErrRetryRefused, "a retry whose lease was lost while it claimed its dead letter")
	check.ErrorIs(t, err, eventstore.ErrLeaseLost)
	now, err := st.Consumers.DeadLetter(ctx, "retry-lease-lost-claiming", d.ID)
	check.NoError(t, err)
	check.Equal(t, now.Attempts, d.Attempts, "the lost lease was recorded as a failed attempt: %q", now.Error)
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(0))
}

// stallingLetters is a dead letter store whose claim renewals wait, for the
// retries whose context carries stallRenewals, until stall is closed.
type stallingLetters struct {
	storekit.DeadLetterStore
	stall   chan struct{}
	stalled atomic.Int32
}

type stallRenewals struct{}

func (s *stallingLetters) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if ctx.Value(stallRenewals{}) != nil && d.Generation != 0 && !d.ClaimedUntil.IsZero() {
		if now, err := s.DeadLetterStore.DeadLetter(ctx, d.Consumer, d.ID); err == nil && !now.ClaimedUntil.IsZero() {
			s.stalled.Add(1)
			select {
			case <-s.stall:
			case <-ctx.Done():
				return eventstore.DeadLetter{}, ctx.Err()
			}
		}
	}
	return s.DeadLetterStore.ParkDeadLetter(ctx, d)
}

// testStalledClaimRenewalDoesNotCommit: a transactional retry, dead letters
// in another store, whose claim renewals hang (the store behind a busy
// writer or a slow link): its claim lapses while its handler runs, and a
// second retry, started then, claims the dead letter. The first one must
// not commit after its claim could have lapsed: it is refused, and the
// second applies the event, once. It committed too, as its renewals
// waited without bound, and the event applied twice.
func testStalledClaimRenewalDoesNotCommit[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	stall := &stallingLetters{DeadLetterStore: h.New(t).Consumers, stall: make(chan struct{})}
	defer close(stall.stall)
	// The second retry's renewals must each land within four fifths of
	// the TTL of the one before: at 100 ms that failed now and then under
	// the race detector on a loaded machine (three times in CI and review
	// runs), so the TTL leaves room for a slow round trip.
	const ttl = 400 * time.Millisecond
	entered := make(chan struct{})
	var once sync.Once
	c, d := parkItem5(t, h, st, "retry-stalled", projection.Options{BatchSize: 4, Retry: fastRetry, LeaseTTL: ttl,
		DeadLetters: stall, Logger: quiet()}, func(ctx context.Context, n int) error {
		if n == 5 && ctx.Value(stallRenewals{}) != nil {
			once.Do(func() {
				close(entered)
				time.Sleep(3 * ttl) // past the claim's lapse; a handler that ignores its context
			})
		}
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- c.RetryDeadLetter(context.WithValue(ctx, stallRenewals{}, true), d.ID) }()
	<-entered
	time.Sleep(2 * ttl) // the first retry's claim lapses; its renewal waits
	check.Less(t, 0, stall.stalled.Load(), "the first retry's renewal did not wait")
	errSecond := c.RetryDeadLetter(ctx, d.ID) // waits for the first one's transaction, where the store locks
	errFirst := <-first
	check.NoError(t, errSecond, "the retry after the first one's claim lapsed")
	check.ErrorIs(t, errFirst, projection.ErrRetryRefused, "the retry whose claim lapsed while it ran")
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1), "item 5 applied by both retries")
}
