package projectiontest

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/retry"
)

// errCrashed is what the stores of a consumer that "died" return: the
// process is gone, nothing it still tries to write lands.
var errCrashed = errors.New("projectiontest: the process died here")

// crashSwitch is flipped by the first dead letter parked, so that the
// consumer dies between parking and moving its checkpoint past the event.
type crashSwitch struct{ crashed atomic.Bool }

// crashAfterPark is a consumer store whose process dies right after a dead
// letter is parked: the transaction it was parked in (if any) does not
// commit, and every later checkpoint save or transaction fails.
type crashAfterPark[Tx any] struct {
	ConsumerStore[Tx]
	sw *crashSwitch
}

func (s crashAfterPark[Tx]) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.ConsumerStore.ParkDeadLetter(ctx, d)
	if err == nil {
		s.sw.crashed.Store(true)
	}
	return got, err
}

func (s crashAfterPark[Tx]) ParkDeadLetterTx(ctx context.Context, tx Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.ConsumerStore.ParkDeadLetterTx(ctx, tx, d)
	if err == nil {
		s.sw.crashed.Store(true)
	}
	return got, err
}

func (s crashAfterPark[Tx]) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if s.sw.crashed.Load() {
		return errCrashed
	}
	return s.ConsumerStore.SaveCheckpoint(ctx, name, expected, next, fence)
}

func (s crashAfterPark[Tx]) SaveCheckpointTx(ctx context.Context, tx Tx, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if s.sw.crashed.Load() {
		return errCrashed
	}
	return s.ConsumerStore.SaveCheckpointTx(ctx, tx, name, expected, next, fence)
}

// InTx dies before the commit when a dead letter was parked during fn,
// which rolls the transaction back, as a process killed before its commit
// does.
func (s crashAfterPark[Tx]) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	if s.sw.crashed.Load() {
		return errCrashed
	}
	return s.ConsumerStore.InTx(ctx, func(ctx context.Context, tx Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		if s.sw.crashed.Load() {
			return errCrashed
		}
		return nil
	})
}

// lettersCrash is a dead letter store of its own (not the checkpoint's)
// that flips sw once a dead letter is parked in it.
type lettersCrash struct {
	storekit.DeadLetterStore
	sw *crashSwitch
}

func (s lettersCrash) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	got, err := s.DeadLetterStore.ParkDeadLetter(ctx, d)
	if err == nil {
		s.sw.crashed.Store(true)
	}
	return got, err
}

// testParkThenCrash is the double apply of issue 11: the handler fails on
// item 5 while a dependency is down, the event is parked, and the process
// dies before its checkpoint passes the event. The restarted consumer
// handles item 5 (the dependency is back); retrying the dead letters
// afterwards must not apply it a second time. It runs for a transactional
// consumer whose dead letters are in its own store, for a plain consumer,
// and for a transactional consumer whose dead letters live in another
// store.
func testParkThenCrash[Tx any](t testing.TB, h Harness[Tx]) {
	for _, mode := range []string{"tx", "plain", "foreign"} {
		check.Run(t, mode, func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 10, 0)
			sw := &crashSwitch{}
			dying := crashAfterPark[Tx]{ConsumerStore: st.Consumers, sw: sw}
			var letters storekit.DeadLetterStore // nil: the checkpoint store's
			var dyingLetters storekit.DeadLetterStore
			if mode == "foreign" {
				letters = h.New(t).Consumers
				dyingLetters = lettersCrash{DeadLetterStore: letters, sw: sw}
			}
			got := newSeen()
			build := func(consumers ConsumerStore[Tx], dl storekit.DeadLetterStore, down bool) *projection.Consumer {
				fail := func(n int) error {
					if down && n == 5 {
						return errors.New("the payment service is down")
					}
					return nil
				}
				opts := projection.Options{BatchSize: 4, Retry: fastRetry, DeadLetters: dl, Logger: quiet()}
				var c *projection.Consumer
				var err error
				if mode == "plain" {
					c, err = projection.New("park-crash", st.Events, Registry(t), consumers, plainCounter(got, fail), opts)
				} else {
					c, err = projection.NewTx("park-crash", st.Events, Registry(t), consumers, countingTx(h, fail), opts)
				}
				check.NoError(t, err)
				return c
			}
			count := counter(t, h, st, got, mode == "plain")

			err := build(dying, dyingLetters, true).CatchUp(ctx)
			check.ErrorIs(t, err, errCrashed, "the first run must die after parking")
			check.True(t, sw.crashed.Load())
			check.Equal(t, count(5), int64(0))

			restarted := build(st.Consumers, letters, false)
			// A dead letter left by the dead run is of an event that the
			// checkpoint has not passed: the consumer handles it again, so a
			// retry now would apply it twice.
			for _, d := range collectLetters(t, restarted) {
				check.ErrorIs(t, restarted.RetryDeadLetter(ctx, d.ID), projection.ErrRetryRefused)
			}
			check.Equal(t, count(5), int64(0), "a retry applied an event that the consumer had not passed")
			check.NoError(t, restarted.CatchUp(ctx))
			check.Equal(t, count(5), int64(1), "the restarted consumer handles the event")
			retryLeftCountsOnce(t, restarted, count)
		})
	}
}

// counter returns how often item n was applied: by a plain handler that
// records in got, or in the read model of st.
func counter[Tx any](t testing.TB, h Harness[Tx], st Stores[Tx], got *seen, plain bool) func(n int) int64 {
	return func(n int) int64 {
		if plain {
			return int64(got.count(n))
		}
		return h.Get(t, st, itemKey(n))
	}
}

// retryLeftCountsOnce retries every dead letter c has left, then checks
// that item 5 (the one that failed) counts exactly once, that no dead
// letter is left, and that items 0 to 9 were all handled.
func retryLeftCountsOnce(t testing.TB, c *projection.Consumer, count func(n int) int64) {
	t.Helper()
	for _, d := range collectLetters(t, c) {
		check.NoError(t, c.RetryDeadLetter(context.Background(), d.ID))
	}
	check.Equal(t, count(5), int64(1), "item 5 after handling and retrying every dead letter: applied twice, or never")
	check.Len(t, collectLetters(t, c), 0)
	for n := range 10 {
		check.Less(t, 0, count(n), "item %d", n)
	}
}

// parkCounter counts the dead letters parked through it, in or out of a
// transaction.
type parkCounter[Tx any] struct {
	ConsumerStore[Tx]
	parks *atomic.Int32
}

func (s parkCounter[Tx]) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	s.parks.Add(1)
	return s.ConsumerStore.ParkDeadLetter(ctx, d)
}

func (s parkCounter[Tx]) ParkDeadLetterTx(ctx context.Context, tx Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	s.parks.Add(1)
	return s.ConsumerStore.ParkDeadLetterTx(ctx, tx, d)
}

// testDecodeErrorParkedOnce: an event that cannot be decoded is parked
// once, at once: no backoff (retrying a decode cannot help) and no second
// park of the same part, whatever the retry schedule.
func testDecodeErrorParkedOnce[Tx any](t testing.TB, h Harness[Tx]) {
	for _, attempts := range []int{1, 2, 5} {
		check.Run(t, strings.Repeat("x", attempts), func(t testing.TB) {
			st := h.New(t)
			ctx := context.Background()
			appendItems(t, st.Events, "item-a", 0, 3, 0)
			_, err := st.Events.Append(ctx, "item-a", eventstore.Any,
				eventstore.EventData{Type: "ptest.unknown", SchemaVersion: 1, Data: []byte(`{}`)})
			check.NoError(t, err)
			appendItems(t, st.Events, "item-a", 3, 3, 0)
			parks := &atomic.Int32{}
			var log lockedBuffer
			c, err := projection.NewTx("decode-once", st.Events, Registry(t), parkCounter[Tx]{ConsumerStore: st.Consumers, parks: parks},
				countingTx(h, nil), projection.Options{BatchSize: 10,
					Retry:  retry.Policy{Attempts: attempts, Initial: time.Millisecond, Max: time.Millisecond},
					Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			check.NoError(t, err)
			check.NoError(t, c.CatchUp(ctx))
			check.Equal(t, parks.Load(), int32(1), "parks of the undecodable event")
			check.True(t, !strings.Contains(log.String(), "retrying"), "a decode error was retried with backoff:\n%s", log.String())
			letters := collectLetters(t, c)
			check.Len(t, letters, 1)
			check.Equal(t, letters[0].Event.Type, "ptest.unknown")
			check.Equal(t, h.Get(t, st, totalKey), int64(6))
		})
	}
}

// testRetryRespectsLease: while one process holds the consumer's lease, a
// retry from a process that does not hold it must not apply the dead
// letter; the holder's own retry does, once. A holder whose fence a newer
// holder has passed cannot retry either, and once no one runs the
// consumer, any process may (it takes the lease for the retry).
func testRetryRespectsLease[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	fail := newFailOn(5, 7)
	build := func(holder string) *projection.Consumer {
		c, err := projection.NewTx("retry-lease", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check), projection.Options{
			BatchSize: 4, MaxBatchDelay: time.Millisecond, Retry: fastRetry, Leases: st.Consumers, LeaseTTL: leaseTTL,
			Holder: holder, Logger: quiet(),
		})
		check.NoError(t, err)
		return c
	}
	holder, other := build("A"), build("B")
	r := start(t, holder)
	check.Eventually(t, func() bool { return h.Get(t, st, totalKey) == 8 && len(collectLetters(t, holder)) == 2 },
		waitLimit, 5*time.Millisecond)
	letters := collectLetters(t, holder)
	fail.on.Store(false)

	err := other.RetryDeadLetter(ctx, letters[0].ID)
	check.ErrorIs(t, err, projection.ErrRetryRefused, "a process without the lease retried a dead letter")
	var refused *projection.RetryRefusedError
	check.ErrorAs(t, err, &refused)
	check.Equal(t, refused.ID, letters[0].ID)
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(0), "a retry without the lease applied its effect")
	_, err = st.Consumers.DeadLetter(ctx, "retry-lease", letters[0].ID)
	check.NoError(t, err, "the refused retry resolved the dead letter")

	check.NoError(t, holder.RetryDeadLetter(ctx, letters[0].ID))
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1))

	// A newer holder claims the checkpoint under a higher fence (as after
	// a hand-over that the paused holder has not noticed): the former
	// holder's retry is fenced out.
	cp, err := st.Consumers.Checkpoint(ctx, "retry-lease")
	check.NoError(t, err)
	check.NoError(t, st.Consumers.SaveCheckpoint(ctx, "retry-lease", cp.Position, cp.Position, cp.Fence+1))
	err = holder.RetryDeadLetter(ctx, letters[1].ID)
	check.ErrorIs(t, err, projection.ErrRetryRefused)
	check.ErrorIs(t, err, eventstore.ErrFenced)
	check.Equal(t, h.Get(t, st, itemKey(7)), int64(0), "a fenced retry applied its effect")
	r.stop(t)

	// No one runs the consumer now: a retry takes the lease for itself.
	check.NoError(t, other.RetryDeadLetter(ctx, letters[1].ID))
	check.Equal(t, h.Get(t, st, itemKey(7)), int64(1))
	check.Equal(t, h.Get(t, st, totalKey), int64(10))
	check.Len(t, collectLetters(t, other), 0)
}

// testSameEventIDTwoStreams: event IDs are unique per stream only. Two
// failing events that share an ID in two streams are two dead letters,
// each listed, each retried into its own effect.
func testSameEventIDTwoStreams[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	id := uuid.New()
	for i, stream := range []string{"item-a", "item-b"} {
		_, err := st.Events.Append(ctx, stream, eventstore.NoStream, eventstore.EventData{
			ID: id, Type: "ptest.item", SchemaVersion: 1, Data: []byte(`{"n":` + string(rune('1'+i)) + `}`)})
		check.NoError(t, err)
	}
	fail := newFailOn(1, 2)
	c, err := projection.NewTx("same-id", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 10, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	letters := collectLetters(t, c)
	check.Len(t, letters, 2, "one dead letter overwrote the other")
	streams := []string{letters[0].Event.StreamID, letters[1].Event.StreamID}
	slices.Sort(streams)
	check.Equal(t, streams, []string{"item-a", "item-b"})
	fail.on.Store(false)
	for _, d := range letters {
		check.NoError(t, c.RetryDeadLetter(ctx, d.ID))
	}
	check.Equal(t, h.Get(t, st, itemKey(1)), int64(1))
	check.Equal(t, h.Get(t, st, itemKey(2)), int64(1))
}

// testRebuildResolvesDeadLetters: a rebuild moves the checkpoint back
// before a parked event; the replay handles it (the dependency is back),
// and its dead letter must go with that, or retrying the dead letters
// afterwards applies it twice.
func testRebuildResolvesDeadLetters[Tx any](t testing.TB, h Harness[Tx]) {
	st := h.New(t)
	ctx := context.Background()
	appendItems(t, st.Events, "item-a", 0, 10, 0)
	fail := newFailOn(5)
	c, err := projection.NewTx("rebuild-dl", st.Events, Registry(t), st.Consumers, countingTx(h, fail.check),
		projection.Options{BatchSize: 4, Retry: fastRetry, Logger: quiet()})
	check.NoError(t, err)
	check.NoError(t, c.CatchUp(ctx))
	check.Len(t, collectLetters(t, c), 1)
	fail.on.Store(false)
	// No reset: every other item counts twice, which shows the replay.
	check.NoError(t, c.Rebuild(ctx, projection.RebuildOptions{}))
	for _, d := range collectLetters(t, c) {
		check.NoError(t, c.RetryDeadLetter(ctx, d.ID))
	}
	check.Equal(t, h.Get(t, st, itemKey(5)), int64(1), "item 5: replayed once, and once more through its dead letter")
	check.Equal(t, h.Get(t, st, itemKey(4)), int64(2))
	check.Len(t, collectLetters(t, c), 0)
}
