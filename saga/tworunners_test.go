package saga_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The two-runners tests: two processes run the reservation sale at once,
// as staging and production both consuming during a swap, while 200
// orders are placed. Each order must end as its inputs dictate, with each
// command applied exactly once, without leases (every runner steps every
// instance, and the races are absorbed) and with leases and segments
// (the runners split the segments, and the survivor takes all of them
// when the other stops or dies).

const (
	twoRunnerOrders = 200
	twoRunnerWait   = 2 * time.Minute
)

// twoRunnerStores are the stores the two processes share, and the TTL of
// their leases.
type twoRunnerStores struct {
	events    eventstore.Store
	consumers sagatest.ConsumerStore
	leases    storekit.LeaseStore
	ttl       time.Duration
}

func TestTwoRunnersOnMemory(t *testing.T) {
	testTwoRunners(t, func(t *testing.T) twoRunnerStores {
		s, c := memory.New(), memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return twoRunnerStores{events: s, consumers: c, leases: c, ttl: 200 * time.Millisecond}
	})
}

func TestTwoRunnersOnSQLite(t *testing.T) {
	testTwoRunners(t, func(t *testing.T) twoRunnerStores {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		// SQLite has one writer, which lease renewals share with every
		// append: at a TTL of 200ms, under the race detector on a busy
		// machine, renewals missed their deadline hundreds of times a run,
		// and the runners spent the test taking their leases back (safely,
		// but slowly).
		return twoRunnerStores{events: s, consumers: s, leases: s, ttl: time.Second}
	})
}

func TestTwoRunnersOnPostgres(t *testing.T) {
	server := pgtest.ForTest(t, pgtest.Options{})
	testTwoRunners(t, func(t *testing.T) twoRunnerStores {
		s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "tworunners")})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return twoRunnerStores{events: s, consumers: s, leases: s, ttl: 200 * time.Millisecond}
	})
}

func testTwoRunners(t *testing.T, open func(t *testing.T) twoRunnerStores) {
	t.Run("WithoutLeases", func(t *testing.T) { twoRunnersWithoutLeases(t, open(t)) })
	t.Run("WithLeasesOneStops", func(t *testing.T) { twoRunnersWithLeases(t, open(t), false) })
	t.Run("WithLeasesOneDies", func(t *testing.T) { twoRunnersWithLeases(t, open(t), true) })
}

// sale is the reservation flow on shared stores, run by several
// "processes", each with its own bus, runner and store wrapper.
type sale struct {
	stores twoRunnerStores
	reg    *codec.Registry
	clock  *sagatest.Clock
	client *command.Bus // the service that places orders
	logs   *lockedLog
	check  *reservation.Checker
}

func newSale(t *testing.T, s twoRunnerStores) *sale {
	f := &sale{stores: s, reg: codec.NewRegistry(codec.Options{}), clock: sagatest.NewClock(sagatest.Start), logs: &lockedLog{}}
	require.NoError(t, reservation.Register(f.reg))
	f.client = command.New(s.events, f.reg, command.Options{})
	require.NoError(t, reservation.Route(f.client))
	var err error
	f.check, err = reservation.NewChecker(s.events, f.reg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	})
	return f
}

// process is one process running the sale: its runner, and its view of
// the event store, which counts the saga appends that lost a race.
type process struct {
	name   string
	runner *saga.Runner[reservation.Sale]
	store  *racingStore
	leases *severableLeases
	cancel context.CancelFunc
	done   chan error
}

// start starts a process that runs the sale with opts (Leases, if set,
// through a wrapper that can cut the process off from it).
func (f *sale) start(t *testing.T, name string, opts saga.RunnerOptions) *process {
	t.Helper()
	bus := command.New(f.stores.events, f.reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	st, err := reservation.NewSale(f.reg)
	require.NoError(t, err)
	p := &process{name: name, store: &racingStore{Store: f.stores.events}, done: make(chan error, 1)}
	opts.Clock, opts.Checkpoints, opts.Logger, opts.MaxBatchDelay = f.clock, f.stores.consumers, f.logs.logger(name), time.Millisecond
	if opts.Leases != nil {
		p.leases = &severableLeases{LeaseStore: opts.Leases}
		opts.Leases, opts.LeaseTTL = p.leases, f.stores.ttl
	}
	p.runner, err = saga.NewRunner(st, p.store, bus, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- p.runner.Run(ctx) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the process's Run and checks it ended without an error. A
// second stop does nothing.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	if err, ok := <-p.done; ok {
		close(p.done)
		assert.NoError(t, err, "runner %s", p.name)
	}
}

func (p *process) stats(t *testing.T) saga.Stats {
	t.Helper()
	st, err := p.runner.Stats(context.Background())
	require.NoError(t, err)
	return st
}

// twoRunnerOrder is order i: seats and amounts that cover every outcome
// (no seats, refused payment, a payment that never completes and needs its
// deadline, a confirmed order) all through the 200.
func twoRunnerOrder(i int) (id string, seats int, amountCents int64) {
	return fmt.Sprintf("o%03d", i), 1 + i%12, 100 + 97*int64(i%13)
}

// place places the orders from..to-1 from 8 goroutines at once.
func (f *sale) place(t *testing.T, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += 8 {
				id, seats, amount := twoRunnerOrder(i)
				_, err := f.client.Dispatch(context.Background(), command.Message{ID: "place-" + id,
					Command: domain.PlaceOrder{OrderID: id, Seats: seats, AmountCents: amount}})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// ended reports whether every order has ended, leaving out, unless
// withDeadlines, those that wait for their payment deadline: those must
// have their payment pending (the step that sets the deadline sent it).
func (f *sale) ended(t *testing.T, withDeadlines bool) bool {
	t.Helper()
	ctx := context.Background()
	for i := range twoRunnerOrders {
		id, seats, amount := twoRunnerOrder(i)
		want := reservation.Expect(seats, amount)
		end, err := f.check.End(ctx, id)
		require.NoError(t, err)
		if want.AfterDeadline && !withDeadlines {
			if !end.Pending {
				return false
			}
			continue
		}
		if !end.Confirmed && !end.Rejected || want.Cancelled && !end.Cancelled {
			return false
		}
	}
	return true
}

// finish waits for every order to end: first those that need no
// deadline, then, with the clock moved past the payment window, the rest.
func (f *sale) finish(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return f.ended(t, false) }, twoRunnerWait, 10*time.Millisecond,
		"the orders that need no deadline did not end")
	f.clock.Advance(reservation.PaymentWindow)
	require.Eventually(t, func() bool { return f.ended(t, true) }, twoRunnerWait, 10*time.Millisecond,
		"the orders that wait for their payment deadline did not end")
}

// verify checks each order's end and that its order, reservation and
// payment streams hold exactly the events of each command applied once
// (reservation.Checker). It returns how many handler runs the flow needs:
// one per event the sale reacts to, per rejection and per deadline.
func (f *sale) verify(t *testing.T) (steps int64) {
	t.Helper()
	ctx := context.Background()
	for i := range twoRunnerOrders {
		id, seats, amount := twoRunnerOrder(i)
		in := reservation.Inputs{Seats: seats, AmountCents: amount}
		problems, err := f.check.Check(ctx, id, in)
		require.NoError(t, err)
		assert.Empty(t, problems, "order %s (seats %d, amount %d)", id, seats, amount)
		steps += 2 // placed; reserved or not
		if in.Expect().Reserved {
			steps++ // paid, refused or out of time
		}
	}
	return steps
}

// twoRunnersWithoutLeases: both runners step every instance. Each event
// reaches both, so one of them handles it and the other finds it handled
// (a duplicate by the watermark), or both step it at once and one append
// loses (a version conflict, or the same record stored already).
func twoRunnersWithoutLeases(t *testing.T, s twoRunnerStores) {
	f := newSale(t, s)
	a := f.start(t, "staging", saga.RunnerOptions{})
	b := f.start(t, "production", saga.RunnerOptions{})
	f.place(t, 0, twoRunnerOrders)
	f.finish(t)
	a.stop(t)
	b.stop(t)
	steps := f.verify(t)

	sa, sb := a.stats(t), b.stats(t)
	t.Logf("staging: %d handled, %d duplicates, %d appends lost a race; production: %d handled, %d duplicates, %d appends lost a race",
		sa.Handled, sa.Duplicates, a.store.lost.Load(), sb.Handled, sb.Duplicates, b.store.lost.Load())
	assert.Equal(t, steps, sa.Handled+sb.Handled, "each message ran its handler once, whichever runner ran it")
	assert.Positive(t, sa.Handled, "staging did work")
	assert.Positive(t, sb.Handled, "production did work")
	assert.Positive(t, sa.Duplicates+sb.Duplicates, "a runner found messages the other had handled")
	assert.Positive(t, a.store.lost.Load()+b.store.lost.Load(), "the runners raced on one instance at once, and one append lost")
	// Two runners that decide the same step at once store the same record,
	// so the loser's append is a duplicate, not a conflict: Stats.Conflicts
	// counts only the races on two different messages, which may not
	// happen in a run.
	assert.LessOrEqual(t, sa.Conflicts+sb.Conflicts, a.store.conflicts.Load()+b.store.conflicts.Load(),
		"Stats.Conflicts counts the step appends that lost on a conflict (an operator's or a gap release's are not steps)")
	for _, st := range []saga.Stats{sa, sb} {
		assert.Equal(t, []int(nil), st.HeldSegments, "a stopped runner holds nothing")
	}
}

// twoRunnersWithLeases: with four segments, the two runners split them;
// then one stops (gracefully, or as if it died: cut off from the lease
// store, it releases nothing, and its leases must lapse) while orders are
// still placed, and the other takes every segment and ends every order,
// the deadlines of the instances the first one ran included.
func twoRunnersWithLeases(t *testing.T, s twoRunnerStores, dies bool) {
	f := newSale(t, s)
	opts := saga.RunnerOptions{Segments: 4, Leases: s.leases}
	a := f.start(t, "staging", opts)
	b := f.start(t, "production", opts)

	// Each holds some segments, and leads their consumers, the two shares
	// together all of them.
	require.Eventually(t, func() bool {
		ha, hb := leading(t, a), leading(t, b)
		return len(ha) > 0 && len(hb) > 0 && len(ha)+len(hb) == 4 && len(union(ha, hb)) == 4
	}, twoRunnerWait, 10*time.Millisecond, "the runners did not split the segments")
	t.Logf("split: staging runs %v, production %v", a.stats(t).HeldSegments, b.stats(t).HeldSegments)

	f.place(t, 0, twoRunnerOrders/2)
	// Staging stops once it has set deadlines in its segments, which
	// production must then fire.
	require.Eventually(t, func() bool { return a.stats(t).DeadlinesPending > 0 }, twoRunnerWait, time.Millisecond,
		"staging set no deadline before it stopped")
	if dies {
		a.leases.sever()
	}
	a.stop(t)
	f.place(t, twoRunnerOrders/2, twoRunnerOrders)

	require.Eventually(t, func() bool { return slices.Equal(leading(t, b), []int{0, 1, 2, 3}) }, twoRunnerWait, 10*time.Millisecond,
		"production did not take every segment")
	f.finish(t)
	b.stop(t)
	f.verify(t)
	sa, sb := a.stats(t), b.stats(t)
	t.Logf("staging: %d handled before it stopped; production: %d handled, %d duplicates", sa.Handled, sb.Handled, sb.Duplicates)
	assert.Positive(t, sb.Handled, "production did work")
	if dies {
		assert.Positive(t, a.leases.refused.Load(), "the dead runner's lease requests never reached the store")
	}
}

// leading returns the segments whose consumers p holds the leases of.
func leading(t *testing.T, p *process) []int {
	st := p.stats(t)
	if st.Segments == 1 {
		if st.Events.Leader && st.Outbox.Leader {
			return []int{0}
		}
		return nil
	}
	var out []int
	for _, seg := range st.PerSegment {
		if seg.Events.Leader && seg.Outbox.Leader {
			out = append(out, seg.Segment)
		}
	}
	return out
}

func union(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// racingStore is a process's view of the event store: it counts the saga
// appends that lost to another process's append of the same instance,
// whether as a version conflict or as the same record stored already.
type racingStore struct {
	eventstore.Store
	lost      atomic.Int64
	conflicts atomic.Int64 // those of lost that were version or event-ID conflicts
}

func (s *racingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, events...)
	if !strings.HasPrefix(stream, saga.StreamPrefix) {
		return res, err
	}
	if errors.Is(err, eventstore.ErrWrongVersion) || errors.Is(err, eventstore.ErrEventIDConflict) {
		s.conflicts.Add(1)
		s.lost.Add(1)
	}
	if err == nil && res.Duplicate {
		s.lost.Add(1)
	}
	return res, err
}

// errSevered is what a process cut off from the lease store gets.
var errSevered = errors.New("cut off from the lease store")

// severableLeases is a process's way to the lease store; once severed,
// nothing reaches the store, as for a process that died: its leases are
// neither renewed nor released, and lapse.
type severableLeases struct {
	storekit.LeaseStore
	cut     atomic.Bool
	refused atomic.Int64
}

func (s *severableLeases) sever() { s.cut.Store(true) }

func (s *severableLeases) severed() bool {
	if s.cut.Load() {
		s.refused.Add(1)
		return true
	}
	return false
}

func (s *severableLeases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	if s.severed() {
		return storekit.Lease{}, false, errSevered
	}
	return s.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

func (s *severableLeases) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if s.severed() {
		return storekit.Lease{}, errSevered
	}
	return s.LeaseStore.RenewLease(ctx, l, ttl)
}

func (s *severableLeases) ReleaseLease(ctx context.Context, l storekit.Lease) error {
	if s.severed() {
		return errSevered
	}
	return s.LeaseStore.ReleaseLease(ctx, l)
}

// lockedLog collects the processes' logs, shown when a test fails.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedLog) logger(process string) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo})).With(slog.String("process", process))
}
