package projectiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
)

// hungLeaseTTL is the hung-renewal test's lease: long against scheduling
// delays on a loaded machine, since the consumer stops a fifth of it
// before the lease lapses, and short enough for a quick test.
const hungLeaseTTL = 2 * time.Second

// hungLeases grants the first lease as the store does, then hangs: its
// renewals block until their context ends (a stalled connection, a stuck
// database), and so do later acquisitions, which only record that the
// consumer went back to waiting.
type hungLeases struct {
	storekit.LeaseStore
	mu        sync.Mutex
	granted   storekit.Lease // the store's answer, with its own expiry
	hangSince time.Time      // when the first renewal started
	acquired  bool
	waiting   chan struct{} // closed when the consumer asks for the lease again
	once      sync.Once
}

func (h *hungLeases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	h.mu.Lock()
	first := !h.acquired
	h.acquired = true
	h.mu.Unlock()
	if !first {
		h.once.Do(func() { close(h.waiting) })
		<-ctx.Done()
		return storekit.Lease{}, false, ctx.Err()
	}
	l, ok, err := h.LeaseStore.AcquireLease(ctx, name, holder, ttl)
	h.mu.Lock()
	h.granted = l
	h.mu.Unlock()
	return l, ok, err
}

func (h *hungLeases) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	h.mu.Lock()
	if h.hangSince.IsZero() {
		h.hangSince = time.Now()
	}
	h.mu.Unlock()
	<-ctx.Done()
	return storekit.Lease{}, ctx.Err()
}

// testHungRenewal runs a plain consumer, which has no transaction that a
// fence could roll back, while its lease renewal hangs. It must stop
// handling events before its lease lapses as the store counts it: no
// handler call may start at or after the expiry the store gave the lease,
// since another process may hold it from then on.
func testHungRenewal[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	leases := &hungLeases{LeaseStore: st.Consumers, waiting: make(chan struct{})}
	var mu sync.Mutex
	var starts []time.Time
	c, err := projection.New("hung", st.Events, Registry(t), st.Consumers,
		projection.Typed(func(context.Context, Item, codec.Decoded) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return nil
		}),
		projection.Options{BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: leases, LeaseTTL: hungLeaseTTL, Logger: quiet()})
	check.NoError(t, err)

	// Events keep coming, so that a consumer that goes on past its lease
	// has something to handle there.
	feedCtx, stopFeed := context.WithCancel(context.Background())
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for n := 0; feedCtx.Err() == nil; n++ {
			_, err := st.Events.Append(feedCtx, "hung-items", eventstore.Any,
				eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, n)})
			if err != nil && feedCtx.Err() == nil {
				t.Errorf("appending: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() {
		stopFeed()
		<-fed
	}()

	r := start(t, c)
	// A consumer that does not give up in time would keep handling events
	// until it is stopped here, a whole TTL after its lease lapsed.
	var expires time.Time
	check.Eventually(t, func() bool {
		leases.mu.Lock()
		defer leases.mu.Unlock()
		expires = leases.granted.Expires
		return !expires.IsZero()
	}, waitLimit, 5*time.Millisecond, "the consumer never took its lease")
	gaveUp := true
	select {
	case <-leases.waiting:
	case <-time.After(time.Until(expires.Add(hungLeaseTTL))):
		gaveUp = false
	}
	r.stop(t)

	leases.mu.Lock()
	hangSince := leases.hangSince
	leases.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	check.True(t, len(starts) > 0, "no event was handled")
	check.True(t, !hangSince.IsZero(), "the lease was never renewed")
	check.True(t, starts[len(starts)-1].After(hangSince),
		"no event was handled while the renewal hung: the test proves less than it claims")
	for i, at := range starts {
		check.True(t, at.Before(expires), "handler call %d of %d started at %s, %s after the lease lapsed at %s",
			i+1, len(starts), at.Format(time.RFC3339Nano), at.Sub(expires), expires.Format(time.RFC3339Nano))
	}
	check.True(t, gaveUp, "the consumer never went back to waiting for the lease")
}

// longLeaseTTL is the lease of the long-transaction tests: a batch or a
// transaction of another consumer lasts longer than it.
const longLeaseTTL = 500 * time.Millisecond

// testLongTransactionsKeepTheLease: an exclusive transactional consumer
// keeps its lease through transactions longer than its TTL, its own (a
// slow batch) or another consumer's on the same store, which on SQLite
// hold the one writer that renewals wait for. Its batches commit: it
// neither drops its lease and rolls back the same batch forever, nor
// counts an event twice.
func testLongTransactionsKeepTheLease[Tx any](t testing.TB, h Harness[Tx]) {
	for _, whose := range []string{"own", "another's"} {
		check.Run(t, whose, func(t testing.TB) {
			st := h.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			appendItems(t, st.Events, "item-a", 0, 8, 0)
			slow := time.Duration(0)
			if whose == "own" {
				slow = longLeaseTTL * 3 / 10 // a batch of 4: 1.2 TTL
			}
			handle := countingTx(h, nil)
			c, err := projection.NewTx("long-tx", st.Events, Registry(t), st.Consumers,
				func(ctx context.Context, tx Tx, d codec.Decoded) error {
					time.Sleep(slow)
					return handle(ctx, tx, d)
				}, projection.Options{BatchSize: 4, Exclusive: true, LeaseTTL: longLeaseTTL, Logger: quiet()})
			check.NoError(t, err)
			if whose == "another's" {
				// Another consumer's transactions on the same store, each
				// longer than the lease, one after the other.
				others, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				defer func() {
					stop()
					<-done
				}()
				go func() {
					defer close(done)
					for others.Err() == nil {
						_ = st.Consumers.InTx(others, func(context.Context, Tx) error {
							time.Sleep(longLeaseTTL * 6 / 5)
							return nil
						})
					}
				}()
			}
			check.NoError(t, c.CatchUp(ctx), "the consumer lost its lease to a transaction longer than its TTL")
			for n := range 8 {
				check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
			}
		})
	}
}
