package projectiontest

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// reparkHook is a consumer store that runs before, once, when a failed
// retry records its failure outside a transaction: a compare-and-set park
// (a generation set) that clears the retry's claim.
type reparkHook[Tx any] struct {
	ConsumerStore[Tx]
	once   sync.Once
	before func(claimed eventstore.DeadLetter)
}

func (s *reparkHook[Tx]) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if d.Generation != 0 && d.ClaimedUntil.IsZero() && d.Attempts > 0 && d.Error != "" {
		if stored, err := s.ConsumerStore.DeadLetter(ctx, d.Consumer, d.ID); err == nil && !stored.ClaimedUntil.IsZero() {
			s.once.Do(func() { s.before(stored) })
		}
	}
	return s.ConsumerStore.ParkDeadLetter(ctx, d)
}

// testRetryActsOnWhatItRead: a retry that fails records its failure on the
// dead letter it read, and on nothing else. While its handler ran, an
// operator skipped the dead letter, or the retry's claim lapsed (its
// process paused longer than the claim lasts) and another retry applied
// it and deleted it: the failed retry must not park it again, or the next
// retry applies the event a second time (in the mode documented as
// exactly once), or undoes the skip.
func testRetryActsOnWhatItRead[Tx any](t testing.TB, h Harness[Tx]) {
	for _, meanwhile := range []string{"retried", "skipped"} {
		check.Run(t, meanwhile, func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			fail := newFailOn(5)
			store := &reparkHook[Tx]{ConsumerStore: st.Consumers}
			const claimTTL = 200 * time.Millisecond
			c, err := projection.NewTx("retry-read", st.Events, Registry(t), store, countingTx(h, fail.check),
				projection.Options{BatchSize: 4, Retry: fastRetry, LeaseTTL: claimTTL, Logger: quiet()})
			check.NoError(t, err)
			check.NoError(t, c.CatchUp(ctx))
			letters := collectLetters(t, c)
			check.Len(t, letters, 1)
			id := letters[0].ID

			store.before = func(claimed eventstore.DeadLetter) {
				if meanwhile == "skipped" {
					check.NoError(t, c.SkipDeadLetter(ctx, id))
					return
				}
				fail.on.Store(false)
				err := c.RetryDeadLetter(ctx, id)
				check.ErrorIs(t, err, projection.ErrRetryRefused, "a retry beside the failing one, while its claim holds")
				time.Sleep(time.Until(claimed.ClaimedUntil) + 10*time.Millisecond)
				check.NoError(t, c.RetryDeadLetter(ctx, id), "the retry beside the failing one, once its claim lapsed")
				fail.on.Store(true)
			}
			err = c.RetryDeadLetter(ctx, id)
			check.ErrorIs(t, err, projection.ErrHandlerFailed, "the first retry fails")
			check.ErrorIs(t, err, eventstore.ErrDeadLetterChanged, "the failed retry does not say that the dead letter changed")
			check.Len(t, collectLetters(t, c), 0, "the failed retry parked again a dead letter that was %s meanwhile", meanwhile)

			want := int64(1)
			if meanwhile == "skipped" {
				want = 0
			}
			fail.on.Store(false)
			for _, d := range collectLetters(t, c) {
				_ = c.RetryDeadLetter(ctx, d.ID)
			}
			check.Equal(t, h.Get(t, st, itemKey(5)), want, "item 5, %s once while a retry failed", meanwhile)
		})
	}
}

// foreignParkHook is a dead letter store apart from the consumer's that
// runs before, once, when a dead letter is parked in it.
type foreignParkHook struct {
	storekit.DeadLetterStore
	once   sync.Once
	before func()
}

func (s *foreignParkHook) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	s.once.Do(s.before)
	return s.DeadLetterStore.ParkDeadLetter(ctx, d)
}

// readHook is an event store that tells when a consumer starts reading,
// which it does once it has loaded what it knows of its dead letters.
type readHook struct {
	eventstore.Store
	reading chan struct{}
	once    sync.Once
}

func (s *readHook) ReadAll(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	s.once.Do(func() { close(s.reading) })
	return s.Store.ReadAll(ctx, after, f)
}

// testRacingForeignLetters: two deployments of a transactional consumer
// without a lease, dead letters in another store. A parks item 5 from
// inside its transaction and dies before the commit; B started its
// session before that park (so it was not among the dead letters B knew
// of), and handles item 5 once A's transaction is gone. A successful
// handling must resolve the dead letter A left, or a retry applies the
// event twice.
func testRacingForeignLetters[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	letters := h.New(t).Consumers
	opts := func(dl storekit.DeadLetterStore) projection.Options {
		return projection.Options{BatchSize: 4, Retry: retry.Policy{Attempts: 1}, DeadLetters: dl, Logger: quiet()}
	}
	sw := &crashSwitch{}
	dyingLetters := &foreignParkHook{DeadLetterStore: lettersCrash{DeadLetterStore: letters, sw: sw}}
	a, err := projection.NewTx("race-foreign", st.Events, Registry(t), crashAfterPark[Tx]{ConsumerStore: st.Consumers, sw: sw},
		countingTx(h, newFailOn(5).check), opts(dyingLetters))
	check.NoError(t, err)
	bEvents := &readHook{Store: st.Events, reading: make(chan struct{})}
	b, err := projection.NewTx("race-foreign", bEvents, Registry(t), st.Consumers, countingTx(h, nil), opts(letters))
	check.NoError(t, err)
	bDone := make(chan error, 1)
	dyingLetters.before = func() {
		// A's transaction is open, past its checkpoint's compare-and-set:
		// B starts its session now, and its first batch waits for A's
		// transaction to end (or fails against A's commit).
		go func() { bDone <- b.CatchUp(ctx) }()
		select {
		case <-bEvents.reading:
		case <-time.After(waitLimit):
			t.Error("B never started reading")
		}
	}
	check.ErrorIs(t, a.CatchUp(ctx), errCrashed, "A dies after parking item 5, before its commit")
	check.NoError(t, <-bDone)
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1), "B handled item 5")
	check.Len(t, collectLetters(t, b), 0, "the dead letter A parked survived B's successful handling of its event")
	retryLeftCountsOnce(t, b, counter(t, h, st, nil, false))
}

// bigItems appends n items of about size bytes each (the JSON of an Item
// padded with a field the codec ignores).
func bigItems(t testing.TB, s eventstore.Store, stream string, first, n, size int) {
	t.Helper()
	pad := strings.Repeat("x", size)
	for i := first; i < first+n; i++ {
		_, err := s.Append(context.Background(), stream, eventstore.Any,
			eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, i, pad)})
		check.NoError(t, err)
	}
}

// testSessionStartLoadsLittle: the dead letters of events a session has
// passed already are none of its business at start. A start with nothing
// to do, beside many parked events of 128 KiB, must not load their
// payloads (it loaded all of them, 8 MiB here, 1.3 GB for 10,000).
func testSessionStartLoadsLittle[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	const parked, size = 64, 128 << 10
	bigItems(t, st.Events, "item-big", 0, parked, size)
	fail := newFailOn()
	for n := range parked {
		fail.set[n] = true
	}
	c, err := projection.NewTx("start-bounded", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 16, Retry: retry.Policy{Attempts: 1}, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	n, err := st.Consumers.CountDeadLetters(ctx, "start-bounded")
	check.NoError(t, err)
	check.Equal(t, n, parked)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 3 {
		check.NoError(t, c.CatchUp(ctx))
	}
	runtime.ReadMemStats(&after)
	perStart := (after.TotalAlloc - before.TotalAlloc) / 3
	t.Logf("a start with nothing to do, beside %d dead letters of %d KiB, allocated %d KiB", parked, size>>10, perStart>>10)
	check.Less(t, perStart, uint64(parked*size/8), "a session start loads the payloads of dead letters it has passed")
}
