package kurrentdb_test

// Consumer state shared by several stores on one server: the cross-store
// regression tests that crossstore_test.go introduces.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// ---------------------------------------------------------------------------
// Consumer state

// Racing checkpoint saves from two stores: of saves from one expected
// position exactly one wins, the others get ErrCheckpointMoved; a stale
// fence is ErrFenced even when the position matches.
func TestCrossStoreCheckpointCASAcrossStores(t *testing.T) {
	srv := testserver.New(t)
	stores := []*kurrentdb.Store{rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})}
	ctx := context.Background()
	cur := eventstore.Start
	for round := range 20 { // more than the stream's $maxCount of 16
		const racers = 6
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				errs[i] = stores[i%2].SaveCheckpoint(ctx, "cp", cur, eventstore.Position{Major: uint64(round*100 + i + 1)}, 0)
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: two saves won", round)
				winner = i
				continue
			}
			require.ErrorIs(t, err, eventstore.ErrCheckpointMoved, "round %d", round)
		}
		require.NotEqual(t, -1, winner, "round %d: no save won", round)
		cur = eventstore.Position{Major: uint64(round*100 + winner + 1)}
		for _, s := range stores {
			cp, err := s.Checkpoint(ctx, "cp")
			require.NoError(t, err)
			require.Equal(t, cur, cp.Position)
		}
	}
	// Fencing.
	require.NoError(t, stores[0].SaveCheckpoint(ctx, "cp", cur, cur, 5))
	err := stores[1].SaveCheckpoint(ctx, "cp", cur, eventstore.Position{Major: 1}, 4)
	require.ErrorIs(t, err, eventstore.ErrFenced)
	cp, err := stores[1].Checkpoint(ctx, "cp")
	require.NoError(t, err)
	require.Equal(t, storekit.Fence(5), cp.Fence)
	require.NoError(t, stores[1].SaveCheckpoint(ctx, "cp", cur, eventstore.Position{Major: 1}, 6))
}

// A lease handed over between two stores: one holder at a time, the fence
// grows at every change of hands, never repeats, and the old holder's
// renewals, releases and fenced saves fail.
func TestCrossStoreLeaseHandoverAcrossStores(t *testing.T) {
	srv := testserver.New(t)
	a, b := rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	const ttl = 150 * time.Millisecond
	var last storekit.Fence
	holders := []struct {
		s    *kurrentdb.Store
		name string
	}{{a, "A"}, {b, "B"}}
	var prev storekit.Lease
	for round := range 22 { // past the stream's $maxCount of 16
		h := holders[round%2]
		other := holders[(round+1)%2]
		// Racing acquires: one wins.
		var wg sync.WaitGroup
		oks := make([]bool, 4)
		leases := make([]storekit.Lease, 4)
		errs := make([]error, 4)
		for i := range 4 {
			wg.Go(func() {
				hh := holders[(round+i)%2]
				leases[i], oks[i], errs[i] = hh.s.AcquireLease(ctx, "ls", fmt.Sprintf("%s-%d", hh.name, round), ttl)
			})
		}
		wg.Wait()
		var won []storekit.Lease
		for i := range 4 {
			require.NoError(t, errs[i])
			if oks[i] {
				won = append(won, leases[i])
			}
		}
		require.NotEmpty(t, won, "round %d", round)
		holder := won[0].Holder
		for _, l := range won {
			require.Equal(t, holder, l.Holder, "round %d: two holders", round)
		}
		l := won[0]
		require.Greater(t, l.Fence, last, "round %d: the fence grows", round)
		last = l.Fence
		if round > 0 {
			_, err := h.s.RenewLease(ctx, prev, ttl)
			var lost *storekit.LeaseLostError
			require.ErrorAs(t, err, &lost, "round %d: the old holder cannot renew", round)
			require.ErrorAs(t, other.s.ReleaseLease(ctx, prev), &lost)
		}
		prev = l
		if round%3 == 0 {
			s := a
			if strings.HasPrefix(l.Holder, "B") {
				s = b
			}
			require.NoError(t, s.ReleaseLease(ctx, l))
		} else {
			time.Sleep(ttl + 20*time.Millisecond)
		}
	}
}

// Dead letters raced between two stores: parks of one key make one letter;
// updates by generation let exactly one of the racers through; deletes of
// one letter succeed once.
func TestCrossStoreDeadLetterRacesAcrossStores(t *testing.T) {
	srv := testserver.New(t)
	stores := []*kurrentdb.Store{rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})}
	ctx := context.Background()
	const consumer = "dl-race"
	base := eventstore.DeadLetter{Consumer: consumer, Error: "boom", Attempts: 1,
		Event: eventstore.Event{EventData: eventstore.EventData{ID: uuid.New(), Type: "t", Data: []byte(`{"x":1}`)},
			StreamID: "orders", Version: 3, Position: eventstore.Position{Major: 9}}}
	const racers = 6
	got := make([]eventstore.DeadLetter, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { got[i], errs[i] = stores[i%2].ParkDeadLetter(ctx, base) })
	}
	wg.Wait()
	for i := range racers {
		require.NoError(t, errs[i])
		require.Equal(t, got[0].ID, got[i].ID, "one letter per key")
	}
	for _, s := range stores {
		n, err := s.CountDeadLetters(ctx, consumer)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	cur, err := stores[0].DeadLetter(ctx, consumer, got[0].ID)
	require.NoError(t, err)
	require.Equal(t, uint64(racers), cur.Generation, "each park of the key is a new generation")

	// Generation races.
	for round := range 5 {
		cur, err := stores[round%2].DeadLetter(ctx, consumer, got[0].ID)
		require.NoError(t, err)
		for i := range racers {
			wg.Go(func() {
				d := cur
				d.Attempts = 10 + i
				d.ClaimedUntil = time.Now().Add(time.Minute)
				_, errs[i] = stores[i%2].ParkDeadLetter(ctx, d)
			})
		}
		wg.Wait()
		ok := 0
		for i := range racers {
			if errs[i] == nil {
				ok++
				continue
			}
			var changed *storekit.DeadLetterChangedError
			require.ErrorAs(t, errs[i], &changed, "round %d", round)
		}
		require.Equal(t, 1, ok, "round %d: one claim wins", round)
	}
	for i := range racers {
		wg.Go(func() { errs[i] = stores[i%2].DeleteDeadLetter(ctx, consumer, got[0].ID) })
	}
	wg.Wait()
	ok := 0
	for i := range racers {
		if errs[i] == nil {
			ok++
			continue
		}
		var nf *storekit.DeadLetterNotFoundError
		require.ErrorAs(t, errs[i], &nf)
	}
	require.Equal(t, 1, ok)
}

// Snapshots: the last save wins whatever its version, across stores; long
// and odd stream names are kept apart.
func TestCrossStoreSnapshotsAcrossStores(t *testing.T) {
	srv := testserver.New(t)
	a, b := rvOpen(t, srv, kurrentdb.Options{}), rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	long := strings.Repeat("ö", storekit.MaxStreamLen/2)
	long2 := long[:len(long)-2] + "x"
	for _, stream := range []string{"snap-1", long, long2, "snap-ünï-😀"} {
		for i, s := range []*kurrentdb.Store{a, b, a, b} {
			version := uint64(10 - i)
			require.NoError(t, s.SaveSnapshot(ctx, storekit.Snapshot{Stream: stream, Version: version, Type: "st",
				Data: []byte(stream[:4] + fmt.Sprint(i))}))
			for _, r := range []*kurrentdb.Store{a, b} {
				got, ok, err := r.LoadSnapshot(ctx, stream)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, version, got.Version, "last save wins")
				require.Equal(t, stream, got.Stream)
				require.Equal(t, stream[:4]+fmt.Sprint(i), string(got.Data))
			}
		}
	}
}

// Long and odd consumer names: names that share their first 64 bytes (the
// part a hashed stream name keeps) and differ after it, names at the
// limit, and names with "#", "-" and "/" get checkpoints of their own.
func TestCrossStoreLongAndOddConsumerNames(t *testing.T) {
	srv := testserver.New(t)
	s := rvOpen(t, srv, kurrentdb.Options{})
	ctx := context.Background()
	long := strings.Repeat("n", storekit.MaxStreamLen-1)
	names := []string{
		long + "a", long + "b", strings.Repeat("€", storekit.MaxStreamLen/3),
		"checkpoint-x", "x#y", "#" + strings.Repeat("0", 64) + "/a", "a/b-c", "lease-x", "ü",
		strings.Repeat("x", storekit.MaxStreamLen-len(kurrentdb.StatePrefix+"checkpoint-")),
		strings.Repeat("x", storekit.MaxStreamLen-len(kurrentdb.StatePrefix+"checkpoint-")+1),
	}
	for i, name := range names {
		require.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, eventstore.Position{Major: uint64(i + 1)}, 0), name)
		_, ok, err := s.AcquireLease(ctx, name, "h", time.Minute)
		require.NoError(t, err)
		require.True(t, ok, "%q: a lease of its own", name)
	}
	for i, name := range names {
		cp, err := s.Checkpoint(ctx, name)
		require.NoError(t, err)
		require.Equal(t, eventstore.Position{Major: uint64(i + 1)}, cp.Position, name)
	}
	// Too long a name is refused, naming it.
	err := s.SaveCheckpoint(ctx, long+"ab", eventstore.Start, eventstore.Start, 0)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	// None of it shows in reads.
	require.Empty(t, rvAll(t, s, eventstore.Start, eventstore.Filter{}))
}
