// Package projectiontest is the conformance suite of the projection
// consumer on a backend's stores: every store that implements the consumer
// contracts (checkpoints with fencing, dead letters, leases and the
// transactional hook) runs it unchanged. storetest.Run runs it on a store
// with events and consumers in one; a test that keeps them apart calls
// [Run] with a [Harness]:
//
//	func TestProjections(t *testing.T) {
//		projectiontest.Run(t, projectiontest.Harness[*memory.Tx]{
//			New: func(t testing.TB) projectiontest.Stores[*memory.Tx] { ... },
//			Add: func(ctx context.Context, tx *memory.Tx, key string, delta int64) error { ... },
//			Get: func(t *testing.T, s projectiontest.Stores[*memory.Tx], key string) int64 { ... },
//		})
//	}
//
// The crash and two-process tests need [Harness.Open]: stores that several
// processes open from one directory. They re-run the test binary as child
// processes (with -test.run naming the calling test) and kill them with
// SIGKILL; the child finds its role in the environment.
package projectiontest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/upcast"
)

// ConsumerStore is everything a consumer keeps besides events, in one
// store: checkpoints with the transactional hook, dead letters and leases.
type ConsumerStore[Tx any] interface {
	storekit.TxCheckpointStore[Tx]
	storekit.DeadLetterStore
	storekit.LeaseStore
}

// Stores are one backend's stores for one test.
type Stores[Tx any] struct {
	Events    eventstore.Store
	Consumers ConsumerStore[Tx]
}

// Harness tells the suite how to make a backend's stores and how to write
// and read a counter in its read-model database.
type Harness[Tx any] struct {
	// New returns new, empty stores for one test and registers their
	// cleanup with t.Cleanup.
	New func(t testing.TB) Stores[Tx]
	// Open opens the stores kept in dir, creating them if dir is empty,
	// and registers their cleanup with t.Cleanup. Several processes open
	// the same dir at once. Nil skips the crash and two-process tests,
	// which need it (an in-memory backend cannot share its state with a
	// child process).
	Open func(t testing.TB, dir string) Stores[Tx]
	// Add adds delta to the counter key in tx (creating it at zero).
	Add func(ctx context.Context, tx Tx, key string, delta int64) error
	// Get returns the committed value of counter key (zero if absent).
	Get func(t testing.TB, s Stores[Tx], key string) int64

	// suite is the -test.run pattern of the test that runs the suite, for
	// its child processes: the test, or the subtest of a larger suite
	// (storetest.Run), that called Run.
	suite string
}

// Run runs the whole suite.
func Run[Tx any](t *testing.T, h Harness[Tx]) {
	if runChild(t, h) {
		return
	}
	h.suite = testPattern(t.Name())
	tests := []struct {
		name string
		run  func(t testing.TB, h Harness[Tx])
	}{
		{"CatchUpAndLive", testCatchUpAndLive[Tx]},
		{"ParksFailingEvents", testParks[Tx]},
		{"ParksFailingEventsTx", testParksTx[Tx]},
		{"StopsWhenConfigured", testStops[Tx]},
		{"StopsWhenConfiguredPlain", testStopsPlain[Tx]},
		{"ResumeEveryCheckpointWithSplits", testResumeSplits[Tx]},
		{"SplitPartFailureTx", testSplitFailureTx[Tx]},
		{"InterruptedBatchesCountOnceTx", testInterruptedTx[Tx]},
		{"LeaseOneHolderAndHandOver", testLeaseHandOver[Tx]},
		{"FencedHolderCannotCommit", testFencedHolder[Tx]},
		{"HungRenewalStopsBeforeLeaseLapses", testHungRenewal[Tx]},
		{"SessionBesideRunWaits", testSessionBesideRunWaits[Tx]},
		{"LongTransactionsKeepTheLease", testLongTransactionsKeepTheLease[Tx]},
		{"Rebuild", testRebuild[Tx]},
		{"RebuildTx", testRebuildTx[Tx]},
		{"Stats", testStats[Tx]},
		{"WaitFor", testWaitFor[Tx]},
		{"RacingWithoutLease", testRacingWithoutLease[Tx]},
		{"ParkThenCrash", testParkThenCrash[Tx]},
		{"DecodeErrorParkedOnce", testDecodeErrorParkedOnce[Tx]},
		{"HandlerPanicsAreRetriedThenParked", testHandlerPanics[Tx]},
		{"RetryRespectsLease", testRetryRespectsLease[Tx]},
		{"RetryActsOnWhatItRead", testRetryActsOnWhatItRead[Tx]},
		{"RacingWithoutLeaseForeignLetters", testRacingForeignLetters[Tx]},
		{"RetryHandlerErrorsStayHandlerErrors", testRetryHandlerErrorsStayHandlerErrors[Tx]},
		{"ConcurrentRetriesApplyOnce", testConcurrentRetriesApplyOnce[Tx]},
		{"SkipBesideResolve", testSkipBesideResolve[Tx]},
		{"RetryKeepsItsLease", testRetryKeepsItsLease[Tx]},
		{"RetryRefusesADeadLetterClaimedElsewhere", testRetryRefusesADeadLetterClaimedElsewhere[Tx]},
		{"RetryThatLosesItsLeaseIsRefused", testRetryThatLosesItsLeaseIsRefused[Tx]},
		{"RetryThatLosesItsLeaseWhileClaimingIsRefused", testRetryThatLosesItsLeaseWhileClaimingIsRefused[Tx]},
		{"StalledClaimRenewalDoesNotCommit", testStalledClaimRenewalDoesNotCommit[Tx]},
		{"SessionStartLoadsLittle", testSessionStartLoadsLittle[Tx]},
		{"SameEventIDTwoStreams", testSameEventIDTwoStreams[Tx]},
		{"RebuildResolvesDeadLetters", testRebuildResolvesDeadLetters[Tx]},
		{"DeadLetterCrash", testDeadLetterCrash[Tx]},
		{"Crash", testCrash[Tx]},
		{"TwoProcesses", testTwoProcesses[Tx]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

// Item is the suite's event: "ptest.item" at schema version 1.
type Item struct {
	N int `json:"n"`
}

// Registry returns the suite's codec registry: Item, and "ptest.pair"
// version 1, an old event that the upcasters split into two Items
// ({n} and {n + 1_000_000}).
func Registry(t testing.TB) *codec.Registry { return newRegistry(t) }

// newRegistry is [Registry] with more upcaster steps.
func newRegistry(t testing.TB, steps ...upcast.Step) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	check.NoError(t, codec.Register[Item](reg, "ptest.item", 1))
	check.NoError(t, reg.Upcast(upcast.Split("ptest.pair", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
		var n int
		if _, err := fmt.Sscanf(string(r.Data), `{"n":%d}`, &n); err != nil {
			return nil, err
		}
		return []upcast.Raw{
			{Type: "ptest.item", Version: 1, Data: r.Data},
			{Type: "ptest.item", Version: 1, Data: fmt.Appendf(nil, `{"n":%d}`, n+1_000_000)},
		}, nil
	}).Into(upcast.Key{Type: "ptest.item", Version: 1})))
	for _, step := range steps {
		check.NoError(t, reg.Upcast(step))
	}
	check.NoError(t, reg.Validate())
	return reg
}

// appendItems appends items first..first+n-1 to stream, in appends of at
// most 1000; pairs every pairEvery-th one (0: none) as an old split event.
func appendItems(t testing.TB, s eventstore.Store, stream string, first, n, pairEvery int) {
	t.Helper()
	for start := first; start < first+n; start += 1000 {
		var batch []eventstore.EventData
		for i := start; i < min(start+1000, first+n); i++ {
			typ := "ptest.item"
			if pairEvery > 0 && i%pairEvery == 0 {
				typ = "ptest.pair"
			}
			batch = append(batch, eventstore.EventData{Type: typ, SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		_, err := s.Append(context.Background(), stream, eventstore.Any, batch...)
		check.NoError(t, err)
	}
}

// seen records the values a plain handler applied, safe for concurrent
// use.
type seen struct {
	mu sync.Mutex
	n  map[int]int
}

func newSeen() *seen { return &seen{n: make(map[int]int)} }

func (s *seen) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[n]++
}

func (s *seen) count(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[n]
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.n)
}

func (s *seen) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := 0
	for _, c := range s.n {
		sum += c
	}
	return sum
}

// itemKey is the read-model counter of one Item.
func itemKey(n int) string { return fmt.Sprintf("item-%d", n) }

// totalKey is the read-model counter of all Items.
const totalKey = "total"

// countingTx returns a transactional handler that counts each Item under
// its own key and the total, and fails where fail says.
func countingTx[Tx any](h Harness[Tx], fail func(n int) error) func(ctx context.Context, tx Tx, d codec.Decoded) error {
	return func(ctx context.Context, tx Tx, d codec.Decoded) error {
		it, ok := d.Value.(Item)
		if !ok {
			return fmt.Errorf("unexpected value %T", d.Value)
		}
		if fail != nil {
			if err := fail(it.N); err != nil {
				return err
			}
		}
		if err := h.Add(ctx, tx, itemKey(it.N), 1); err != nil {
			return err
		}
		return h.Add(ctx, tx, totalKey, 1)
	}
}
