package projectiontest

import (
	"context"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
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

func start(t testing.TB, c *projection.Consumer) *running {
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
	check.NoError(t, err)
	return s.Leader
}

func (r *running) stop(t testing.TB) {
	r.cancel()
	check.NoError(t, <-r.done)
	r.done <- nil // for the cleanup
}

// testLeaseHandOver runs two instances of one consumer on shared stores:
// one applies the effects, and when it stops the other takes over; each
// event counts once.
func testLeaseHandOver[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	reg := Registry(t)
	run := func(holder string) *running {
		c, err := projection.NewTx("leased", st.Events, reg, st.Consumers, countingTx(h, nil), projection.Options{
			BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: st.Consumers, LeaseTTL: leaseTTL,
			Holder: holder, Logger: quiet(),
		})
		check.NoError(t, err)
		return start(t, c)
	}
	a, b := run("A"), run("B")
	appendItems(t, st.Events, "item-a", 0, 200, 0)
	check.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 200 }, waitLimit, 5*time.Millisecond)
	check.Eventually(t, func() bool { return a.leader(t) != b.leader(t) }, waitLimit, 5*time.Millisecond,
		"exactly one instance leads")
	holder, other := a, b
	if b.leader(t) {
		holder, other = b, a
	}
	holder.stop(t)
	appendItems(t, st.Events, "item-b", 200, 100, 0)
	check.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 300 }, waitLimit, 5*time.Millisecond,
		"the other instance did not take over")
	check.True(t, other.leader(t))
	for n := range 300 {
		check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
	}
}

// frozenLeases simulates a holder that is paused (a long GC or a stopped
// VM): while frozen, its renewals seem to succeed but change nothing, so
// its lease lapses without it noticing.
type frozenLeases struct {
	storekit.LeaseStore
	frozen atomic.Bool
}

func (f *frozenLeases) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if f.frozen.Load() {
		return l, nil
	}
	return f.LeaseStore.RenewLease(ctx, l, ttl)
}

// pausingEvents pauses a consumer's subscription before it yields event
// number at, until wake is closed: the consumer is then idle between two
// batches, holding no transaction, as a process stopped by the OS would be.
type pausingEvents struct {
	eventstore.Store
	at     int
	pause  func()
	paused sync.Once
}

func (p *pausingEvents) Subscribe(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	inner := p.Store.Subscribe(ctx, after, f)
	return func(yield func(eventstore.Event, error) bool) {
		n := 0
		for e, err := range inner {
			if err == nil && n == p.at {
				p.paused.Do(p.pause)
			}
			n++
			if !yield(e, err) {
				return
			}
		}
	}
}

// testFencedHolder pauses the lease holder A between two batches until B
// has taken the lease and claimed the checkpoint, but not moved it: when A
// wakes, its commit is refused by the fence alone (its expected position
// is still right), it goes back to waiting, and nothing counts twice.
func testFencedHolder[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	reg := Registry(t)
	appendItems(t, st.Events, "item-a", 0, 100, 0)
	leases := &frozenLeases{LeaseStore: st.Consumers}
	aWake, aPaused := make(chan struct{}), make(chan struct{})
	bWake, bPaused := make(chan struct{}), make(chan struct{})
	pause := func(paused, wake chan struct{}, also func()) func() {
		return func() {
			also()
			close(paused)
			select {
			case <-wake:
			case <-time.After(waitLimit):
			}
		}
	}
	var aLog lockedBuffer
	a, err := projection.NewTx("fenced", &pausingEvents{Store: st.Events, at: 50, pause: pause(aPaused, aWake, func() { leases.frozen.Store(true) })},
		reg, st.Consumers, countingTx(h, nil), projection.Options{
			BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: leases, LeaseTTL: leaseTTL, Holder: "A",
			Logger: slog.New(slog.NewTextHandler(&aLog, nil)),
		})
	check.NoError(t, err)
	ra := start(t, a)
	<-aPaused
	b, err := projection.NewTx("fenced", &pausingEvents{Store: st.Events, at: 0, pause: pause(bPaused, bWake, func() {})},
		reg, st.Consumers, countingTx(h, nil), projection.Options{
			BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: st.Consumers, LeaseTTL: leaseTTL, Holder: "B", Logger: quiet(),
		})
	check.NoError(t, err)
	rb := start(t, b)
	<-bPaused // B holds the lease and has claimed the checkpoint
	close(aWake)
	check.Eventually(t, func() bool { return strings.Contains(aLog.String(), "is older than the stored fence") },
		waitLimit, 5*time.Millisecond, "the former holder's commit was not refused by the fence")
	check.Equal(t, h.Get(t, st, totalKey), int64(50), "the fenced batch was rolled back")
	close(bWake)
	check.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 100 }, waitLimit, 5*time.Millisecond)
	appendItems(t, st.Events, "item-b", 100, 10, 0)
	check.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 110 }, waitLimit, 5*time.Millisecond)
	check.True(t, rb.leader(t))
	check.True(t, !ra.leader(t))
	for n := range 110 {
		check.Equal(t, h.Get(t, st, itemKey(n)), int64(1), "item %d", n)
	}
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testSessionBesideRunWaits: in the process whose Run holds the lease, a
// CatchUp or Rebuild of the same consumer (the same Consumer, or one built
// apart with the same Options.Holder, as an admin endpoint would) is a
// session of its own: it waits for the lease like any other holder,
// rather than taking Run's for its own (same holder, same fence), replaying
// beside it and then releasing it, which let another process take over
// while Run kept handling. Each event counts once.
func testSessionBesideRunWaits[Tx any](t testing.TB, h Harness[Tx]) {
	for _, call := range []string{"CatchUp", "Rebuild"} {
		check.Run(t, call, func(t testing.TB) {
			st := h.New(t)
			got := newSeen()
			build := func(holder string) *projection.Consumer {
				c, err := projection.New("beside", st.Events, Registry(t), st.Consumers, plainCounter(got, nil), projection.Options{
					BatchSize: 10, MaxBatchDelay: 5 * time.Millisecond, Leases: st.Consumers, LeaseTTL: leaseTTL,
					Holder: holder, Logger: quiet(),
				})
				check.NoError(t, err)
				return c
			}
			running := build("P1")
			r := start(t, running)
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			check.Eventually(t, func() bool { return got.len() == 10 && r.leader(t) }, waitLimit, 5*time.Millisecond)
			// The store names Run's session: the process, and the session's ID.
			l, taken, err := st.Consumers.AcquireLease(context.Background(), "beside", "observer", storekit.MinLeaseTTL)
			check.NoError(t, err)
			check.True(t, !taken)
			check.True(t, l.Holder != "P1", "the holder names the session, not only the process: %q", l.Holder)
			check.Equal(t, projection.ProcessHolder(l.Holder), "P1")

			for i, c := range []*projection.Consumer{running, build("P1")} {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				var err error
				if call == "CatchUp" {
					err = c.CatchUp(ctx)
				} else {
					err = c.Rebuild(ctx, projection.RebuildOptions{})
				}
				cancel()
				check.ErrorIs(t, err, context.DeadlineExceeded,
					"%s %d in the process of Run did not wait for the lease Run holds", call, i+1)
			}
			other := start(t, build("P2"))
			// A loop rather than a "never" helper, which leaves its last check
			// running when it returns, maybe past the stores' close.
			for end := time.Now().Add(leaseTTL); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				check.True(t, !other.leader(t), "another process took the lease over while Run held it")
			}
			appendItems(t, st.Events, "item-b", 10, 10, 0)
			check.Eventually(t, func() bool { return got.len() == 20 }, waitLimit, 5*time.Millisecond)
			r.stop(t)
			other.stop(t)
			for n := range 20 {
				check.Equal(t, got.count(n), 1, "item %d", n)
			}
		})
	}
}
