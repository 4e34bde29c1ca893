package projectiontest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/projection"
)

// leaseTTL is short so that take-overs in the suite are quick, and long
// enough that a renewal is not late on a loaded machine.
const leaseTTL = time.Second

type running struct {
	c      *projection.Consumer
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, c *projection.Consumer) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *running) leader(t testing.TB) bool {
	s, err := r.c.Stats(context.Background())
	require.NoError(t, err)
	return s.Leader
}

func (r *running) stop(t testing.TB) {
	r.cancel()
	require.NoError(t, <-r.done)
	r.done <- nil // for the cleanup
}

// testLeaseHandOver runs two instances of one consumer on shared stores:
// one applies the effects, and when it stops the other takes over; each
// event counts once.
func testLeaseHandOver[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	reg := Registry(t)
	run := func(holder string) *running {
		c, err := projection.NewTx("leased", st.Events, reg, st.Consumers, countingTx(h, nil), projection.Options{
			BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: st.Consumers, LeaseTTL: leaseTTL,
			Holder: holder, Logger: quiet(),
		})
		require.NoError(t, err)
		return start(t, c)
	}
	a, b := run("A"), run("B")
	appendItems(t, st.Events, "item-a", 0, 200, 0)
	require.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 200 }, waitLimit, 5*time.Millisecond)
	require.Eventually(t, func() bool { return a.leader(t) != b.leader(t) }, waitLimit, 5*time.Millisecond,
		"exactly one instance leads")
	holder, other := a, b
	if b.leader(t) {
		holder, other = b, a
	}
	holder.stop(t)
	appendItems(t, st.Events, "item-b", 200, 100, 0)
	require.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 300 }, waitLimit, 5*time.Millisecond,
		"the other instance did not take over")
	assert.True(t, other.leader(t))
	for n := range 300 {
		require.Equal(t, int64(1), h.Get(t, st, itemKey(n)), "item %d", n)
	}
}

// frozenLeases simulates a holder that is paused (a long GC or a stopped
// VM): while frozen, its renewals seem to succeed but change nothing, so
// its lease lapses without it noticing.
type frozenLeases struct {
	eventstore.LeaseStore
	frozen atomic.Bool
}

func (f *frozenLeases) RenewLease(ctx context.Context, l eventstore.Lease, ttl time.Duration) (eventstore.Lease, error) {
	if f.frozen.Load() {
		return l, nil
	}
	return f.LeaseStore.RenewLease(ctx, l, ttl)
}

// testFencedHolder pauses the lease holder in the middle of an event until
// another instance has taken over and handled everything; when it wakes,
// its commit is refused by the fence, and nothing counts twice.
func testFencedHolder[Tx any](t *testing.T, h Harness[Tx]) {
	st := h.New(t)
	reg := Registry(t)
	appendItems(t, st.Events, "item-a", 0, 100, 0)
	leases := &frozenLeases{LeaseStore: st.Consumers}
	wake := make(chan struct{})
	paused := make(chan struct{})
	count := countingTx(h, nil)
	pausing := func(ctx context.Context, tx Tx, d codec.Decoded) error {
		// Pause before writing anything, so that even a store whose open
		// write transaction locks the database lets the successor work.
		if it := d.Value.(Item); it.N == 50 && !leases.frozen.Swap(true) {
			close(paused)
			select {
			case <-wake:
			case <-time.After(waitLimit):
			}
		}
		return count(ctx, tx, d)
	}
	a, err := projection.NewTx("fenced", st.Events, reg, st.Consumers, pausing, projection.Options{
		BatchSize: 1, Leases: leases, LeaseTTL: leaseTTL, Holder: "A", Logger: quiet(),
	})
	require.NoError(t, err)
	ra := start(t, a)
	<-paused
	b, err := projection.NewTx("fenced", st.Events, reg, st.Consumers, countingTx(h, nil), projection.Options{
		BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: st.Consumers, LeaseTTL: leaseTTL, Holder: "B", Logger: quiet(),
	})
	require.NoError(t, err)
	rb := start(t, b)
	require.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 100 }, waitLimit, 5*time.Millisecond,
		"the second instance did not take over from the paused one")
	close(wake)
	// The woken holder must fail to commit item 50 and go back to waiting.
	require.Eventually(t, func() bool {
		cp, err := st.Consumers.Checkpoint(context.Background(), "fenced")
		return err == nil && !ra.leader(t) && cp.Fence > 1
	}, waitLimit, 5*time.Millisecond)
	appendItems(t, st.Events, "item-b", 100, 10, 0)
	require.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 110 }, waitLimit, 5*time.Millisecond)
	assert.True(t, rb.leader(t))
	for n := range 110 {
		require.Equal(t, int64(1), h.Get(t, st, itemKey(n)), "item %d", n)
	}
}
