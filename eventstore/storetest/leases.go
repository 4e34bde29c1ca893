package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// leaseTests check a [storekit.LeaseStore]. Its expiry tests wait for
// short leases (a few hundred milliseconds) to lapse.
var leaseTests = []testCase[storekit.LeaseStore]{
	{"OneHolderAtATime", testLeaseExclusive},
	{"RenewKeepsFence", testLeaseRenew},
	{"ExpiredLeaseChangesHands", testLeaseExpiry},
	{"ReleaseHandsOverAtOnce", testLeaseRelease},
	{"RacingAcquiresOneWins", testLeaseRace},
	{"BadRequests", testLeaseBadRequests},
	{"BadInputTable", testLeaseBadTable},
}

func mustAcquire(t testing.TB, s storekit.LeaseStore, name, holder string, ttl time.Duration) (storekit.Lease, bool) {
	t.Helper()
	l, ok, err := s.AcquireLease(context.Background(), name, holder, ttl)
	check.NoError(t, err, "%s acquiring %q", holder, name)
	return l, ok
}

func testLeaseExclusive(t testing.TB, s storekit.LeaseStore) {
	name := consumerName(t, "lease")
	a, ok := mustAcquire(t, s, name, "A", time.Minute)
	check.True(t, ok)
	check.Equal(t, a.Name, name)
	check.Equal(t, a.Holder, "A")
	check.True(t, a.Fence != 0, "an acquired lease has fence 0: %+v", a)
	check.True(t, a.Expires.After(time.Now().Add(30*time.Second)), "expires %s, not a minute from now", a.Expires)
	held, ok := mustAcquire(t, s, name, "B", time.Minute)
	check.True(t, !ok, "B acquired a lease A holds")
	check.Equal(t, held.Holder, "A", "a refused acquire reports the holder")
	check.Equal(t, held.Fence, a.Fence)
	// Another name is another lease.
	_, ok = mustAcquire(t, s, consumerName(t, "other"), "B", time.Minute)
	check.True(t, ok)
	// Re-acquiring one's own lease renews it.
	again, ok := mustAcquire(t, s, name, "A", time.Minute)
	check.True(t, ok)
	check.Equal(t, again.Fence, a.Fence)
}

func testLeaseRenew(t testing.TB, s storekit.LeaseStore) {
	ctx, name := context.Background(), consumerName(t, "renew")
	a, ok := mustAcquire(t, s, name, "A", time.Minute)
	check.True(t, ok)
	r, err := s.RenewLease(ctx, a, 2*time.Minute)
	check.NoError(t, err)
	check.Equal(t, r.Fence, a.Fence)
	check.True(t, r.Expires.After(a.Expires), "renewal did not extend the lease")
	// Someone else's lease, or a forged fence, cannot be renewed.
	_, err = s.RenewLease(ctx, storekit.Lease{Name: name, Holder: "B", Fence: a.Fence}, time.Minute)
	requireLost(t, err, name)
	_, err = s.RenewLease(ctx, storekit.Lease{Name: name, Holder: "A", Fence: a.Fence + 1}, time.Minute)
	requireLost(t, err, name)
}

func testLeaseExpiry(t testing.TB, s storekit.LeaseStore) {
	ctx, name := context.Background(), consumerName(t, "expiry")
	const ttl = 300 * time.Millisecond
	a, ok := mustAcquire(t, s, name, "A", ttl)
	check.True(t, ok)
	var b storekit.Lease
	check.Eventually(t, func() bool {
		b, ok = mustAcquire(t, s, name, "B", time.Minute)
		return ok
	}, waitLimit, 20*time.Millisecond, "B never took over an expired lease")
	check.Less(t, a.Fence, b.Fence, "the fence did not grow when the lease changed hands")
	_, err := s.RenewLease(ctx, a, time.Minute)
	requireLost(t, err, name)
	requireLost(t, s.ReleaseLease(ctx, a), name)
	// The former holder waits its turn like anyone else.
	_, ok = mustAcquire(t, s, name, "A", time.Minute)
	check.True(t, !ok)
}

func testLeaseRelease(t testing.TB, s storekit.LeaseStore) {
	ctx, name := context.Background(), consumerName(t, "release")
	a, ok := mustAcquire(t, s, name, "A", time.Hour)
	check.True(t, ok)
	check.NoError(t, s.ReleaseLease(ctx, a))
	requireLost(t, s.ReleaseLease(ctx, a), name)
	b, ok := mustAcquire(t, s, name, "B", time.Hour)
	check.True(t, ok, "B could not acquire a released lease")
	check.Less(t, a.Fence, b.Fence)
	// Even the same holder gets a new fence after a release: fences never
	// repeat.
	check.NoError(t, s.ReleaseLease(ctx, b))
	a2, ok := mustAcquire(t, s, name, "A", time.Hour)
	check.True(t, ok)
	check.Less(t, b.Fence, a2.Fence)
}

func testLeaseRace(t testing.TB, s storekit.LeaseStore) {
	name := consumerName(t, "race")
	const racers = 8
	won := make([]bool, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, won[i], errs[i] = s.AcquireLease(context.Background(), name, string(rune('A'+i)), time.Minute)
		}()
	}
	wg.Wait()
	winners := 0
	for i := range racers {
		check.NoError(t, errs[i])
		if won[i] {
			winners++
		}
	}
	check.Equal(t, winners, 1)
}

func testLeaseBadRequests(t testing.TB, s storekit.LeaseStore) {
	ctx := context.Background()
	for _, c := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "A", time.Minute},
		{"bad\x00name", "A", time.Minute},
		{"lease", "", time.Minute},
		{"lease", "A", 0},
		{"lease", "A", storekit.MinLeaseTTL - 1},
	} {
		_, _, err := s.AcquireLease(ctx, c.name, c.holder, c.ttl)
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "acquire %q for %q, TTL %s", c.name, c.holder, c.ttl)
	}
	l, ok, err := s.AcquireLease(ctx, "lease", "A", time.Minute)
	check.NoError(t, err)
	check.True(t, ok)
	_, err = s.RenewLease(ctx, l, -time.Second)
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "renewing for a negative TTL")
}

func requireLost(t testing.TB, err error, name string) {
	t.Helper()
	check.ErrorIs(t, err, eventstore.ErrLeaseLost)
	var le *storekit.LeaseLostError
	check.ErrorAs(t, err, &le)
	check.Equal(t, le.Name, name)
}
