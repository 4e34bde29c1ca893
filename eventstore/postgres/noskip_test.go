package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// The no-skip proof's size; the defaults are the (20 s, 5 rounds).
// CAIRN_NOSKIP_DURATION=2s CAIRN_NOSKIP_ROUNDS=1 makes a quick run. Under
// the race detector it runs one round by default: the detector watches the
// same appenders and subscribers in one round as in five, and `make test`
// runs the five without it (test-outside-race), in its other lane, for the
// rounds take their time whatever the machine (the transactions stay open
// for a while), and in the race run they were the package's longest path.
const (
	noSkipDurationEnv = "CAIRN_NOSKIP_DURATION"
	noSkipRoundsEnv   = "CAIRN_NOSKIP_ROUNDS"
)

func noSkipSize(t *testing.T) (time.Duration, int) {
	d, rounds := 20*time.Second, 5
	if race.Enabled {
		rounds = 1
	}
	if v := os.Getenv(noSkipDurationEnv); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "%s", noSkipDurationEnv)
	}
	if v := os.Getenv(noSkipRoundsEnv); v != "" {
		var err error
		rounds, err = strconv.Atoi(v)
		require.NoError(t, err, "%s", noSkipRoundsEnv)
	}
	return d, rounds
}

// TestNoSkipUnderConcurrentTransactions is the proof that global order never
// skips: 16 appenders commit transactions of random size that stay open for
// a random while, so that they commit out of transaction-ID order, and roll
// back one in ten; three subscribers start from different checkpoints and
// restart at random from the last event they saw. Each must see every
// committed event after its checkpoint exactly once, in strictly increasing
// position order, and no rolled-back event.
func TestNoSkipUnderConcurrentTransactions(t *testing.T) {
	d, rounds := noSkipSize(t)
	for round := range rounds {
		t.Run(fmt.Sprintf("round%d", round+1), func(t *testing.T) { noSkipRound(t, d) })
	}
}

func noSkipRound(t *testing.T, d time.Duration) {
	// Every appender holds a connection for its whole transaction.
	s := newStoreAt(t, withPoolSize(server.URL, 40), postgres.Options{PageSize: 64})
	ctx := context.Background()

	// Seed events give the subscribers different checkpoints to start from.
	var seed []eventstore.Event
	for i := range 30 {
		_, err := s.Append(ctx, fmt.Sprintf("seed-%d", i%3), eventstore.Any, event("seeded"))
		require.NoError(t, err)
	}
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		seed = append(seed, e)
	}
	require.Len(t, seed, 30)

	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	starts := []int{-1, 9, 29} // index of the checkpoint event in seed; -1 is Start
	subs := make([]*noSkipSubscriber, len(starts))
	var subsDone sync.WaitGroup
	for i, at := range starts {
		sub := &noSkipSubscriber{
			seen:     make(map[uuid.UUID]eventstore.Position),
			base:     len(seed) - 1 - at,
			want:     -1,
			complete: make(chan struct{}),
			stopped:  make(chan struct{}),
		}
		if at >= 0 {
			sub.last = seed[at].Position
		}
		subs[i] = sub
		subsDone.Add(1)
		go func() {
			defer subsDone.Done()
			defer close(sub.stopped)
			sub.run(subCtx, s, int64(i))
		}()
	}

	var (
		mu        sync.Mutex
		committed = make(map[uuid.UUID]bool)
		rolled    = make(map[uuid.UUID]bool) // rolled back, or refused (stale version, younger writer)
		conflicts int
		failures  []error
	)
	deadline := time.Now().Add(d)
	var writers sync.WaitGroup
	for w := range 16 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) {
				evs := make([]eventstore.EventData, 1+rng.IntN(5))
				for i := range evs {
					evs[i] = event("noskip")
				}
				rollback := rng.IntN(10) == 0
				err := noSkipAppend(ctx, s, rng, fmt.Sprintf("noskip-%d", rng.IntN(40)), evs, rollback)
				mu.Lock()
				switch {
				case errors.Is(err, eventstore.ErrWrongVersion), errors.Is(err, postgres.ErrTxTooOld):
					// Lost an optimistic race, or a race for the stream's
					// next version to a younger transaction: nothing was
					// written.
					conflicts++
					for _, e := range evs {
						rolled[e.ID] = true
					}
				case err != nil:
					failures = append(failures, err)
				default:
					for _, e := range evs {
						if rollback {
							rolled[e.ID] = true
						} else {
							committed[e.ID] = true
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	writers.Wait()
	require.Empty(t, failures, "appends failed")
	require.NotEmpty(t, rolled, "the round rolled nothing back: it proves less than it claims")

	for _, sub := range subs {
		sub.setWant(sub.base + len(committed))
	}
	// Liveness bound, not a speed check: a healthy store delivers within
	// a poll interval of the last commit.
	waitAll := time.After(60 * time.Second)
	for i, sub := range subs {
		select {
		case <-sub.complete:
		case <-sub.stopped:
			require.FailNow(t, "subscriber ended early", "subscriber %d: %v", i, sub.error())
		case <-waitAll:
			sub.mu.Lock()
			got := len(sub.seen)
			sub.mu.Unlock()
			require.FailNow(t, "subscriber stalled", "subscriber %d saw %d of %d events", i, got, sub.want)
		}
	}
	stopSubs()
	subsDone.Wait()

	for i, sub := range subs {
		require.NoError(t, sub.err, "subscriber %d", i)
		for id := range committed {
			_, ok := sub.seen[id]
			require.True(t, ok, "subscriber %d never saw committed event %s", i, id)
		}
		for id := range rolled {
			_, ok := sub.seen[id]
			require.False(t, ok, "subscriber %d saw rolled-back event %s", i, id)
		}
		assert.Len(t, sub.seen, sub.want, "subscriber %d: events seen", i)
		assert.Greater(t, sub.restarts, 0, "subscriber %d never restarted", i)
	}
	t.Logf("%d events committed, %d rolled back or refused (%d appends refused for a stale version or a younger writer); subscriber restarts %d/%d/%d",
		len(committed), len(rolled), conflicts, subs[0].restarts, subs[1].restarts, subs[2].restarts)
}

// noSkipAppend appends in a transaction that stays open for a random while
// after the append (so that transactions commit out of ID order), and then
// commits or rolls back. A third of the appends use Append instead, which
// notifies subscribers.
func noSkipAppend(ctx context.Context, s *postgres.Store, rng *rand.Rand, stream string, evs []eventstore.EventData, rollback bool) error {
	if !rollback && rng.IntN(3) == 0 {
		_, err := s.Append(ctx, stream, eventstore.Any, evs...)
		return err
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	expected := eventstore.Any
	if rng.IntN(4) == 0 {
		// An exact version that is often stale makes some appends fail
		// inside the transaction, which must leave it usable.
		expected = eventstore.Exact(uint64(rng.IntN(20)))
	}
	if _, err := s.AppendTx(ctx, tx, stream, expected, evs...); err != nil {
		if !errors.Is(err, eventstore.ErrWrongVersion) && !errors.Is(err, postgres.ErrTxTooOld) {
			return err
		}
		if _, xerr := tx.Exec(ctx, "SELECT 1"); xerr != nil {
			return fmt.Errorf("transaction unusable after %w: %w", err, xerr)
		}
		return err
	}
	time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
	if rollback {
		return tx.Rollback(ctx)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.Notify()
	return nil
}

// noSkipSubscriber subscribes, restarting at random from the last position
// it saw, and records what it sees.
type noSkipSubscriber struct {
	mu       sync.Mutex
	seen     map[uuid.UUID]eventstore.Position
	last     eventstore.Position
	base     int           // seeded events after the starting checkpoint
	want     int           // events to see before complete closes; -1 until known
	complete chan struct{} // closed when want events were seen
	stopped  chan struct{} // closed when run returns
	restarts int
	err      error
	// order, when set, also checks each stream's version order.
	order *versionOrder
}

func (sub *noSkipSubscriber) error() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.err
}

func (sub *noSkipSubscriber) setWant(n int) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.want = n
	sub.check()
}

// check closes complete once every wanted event was seen.
func (sub *noSkipSubscriber) check() {
	if sub.want >= 0 && len(sub.seen) >= sub.want && !isClosed(sub.complete) {
		close(sub.complete)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (sub *noSkipSubscriber) run(ctx context.Context, s *postgres.Store, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		restartAfter := 1 + rng.IntN(400)
		n := 0
		for e, err := range s.Subscribe(ctx, sub.last, eventstore.Filter{}) {
			if err != nil {
				if ctx.Err() == nil {
					sub.fail(fmt.Errorf("subscription ended: %w", err))
				}
				return
			}
			if !sub.record(e) {
				return
			}
			if n++; n == restartAfter {
				break
			}
		}
		sub.mu.Lock()
		sub.restarts++
		sub.mu.Unlock()
	}
}

func (sub *noSkipSubscriber) record(e eventstore.Event) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.last.Before(e.Position) {
		sub.err = fmt.Errorf("event %s at %s does not come after %s", e.ID, e.Position, sub.last)
		return false
	}
	if p, dup := sub.seen[e.ID]; dup {
		sub.err = fmt.Errorf("event %s seen twice, at %s and %s", e.ID, p, e.Position)
		return false
	}
	if sub.order != nil {
		if sub.err = sub.order.check(e); sub.err != nil {
			return false
		}
	}
	sub.seen[e.ID] = e.Position
	sub.last = e.Position
	sub.check()
	return true
}

func (sub *noSkipSubscriber) fail(err error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.err = err
}

// event returns an event of type typ with a fresh ID.
func event(typ string) eventstore.EventData {
	return eventstore.EventData{ID: uuid.New(), Type: typ, SchemaVersion: 1, Data: []byte(`{}`)}
}
