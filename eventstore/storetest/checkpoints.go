package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// checkpointTests check a [storekit.CheckpointStore]. Consumer names are
// unique per test, so a shared database works too.
var checkpointTests = []testCase[storekit.CheckpointStore]{
	{"MissingIsStart", testCheckpointMissing},
	{"SaveMovesAndRoundTrips", testCheckpointRoundTrip},
	{"CompareAndSet", testCheckpointCompareAndSet},
	{"Fencing", testCheckpointFencing},
	{"ResetMovesBack", testCheckpointReset},
	{"NamesAreIndependent", testCheckpointNames},
	{"RacingSavesOneWins", testCheckpointRace},
	{"BadNames", testCheckpointBadNames},
	{"BadFences", testCheckpointBadFences},
	{"CanceledContext", testCheckpointCanceled},
}

func consumerName(t testing.TB, what string) string {
	return newNames(t).category + "-" + what
}

func checkpointAt(major, minor uint64) eventstore.Position {
	return eventstore.Position{Major: major, Minor: minor}
}

func mustCheckpoint(t testing.TB, s storekit.CheckpointStore, name string) storekit.Checkpoint {
	t.Helper()
	cp, err := s.Checkpoint(context.Background(), name)
	check.NoError(t, err, "reading the checkpoint of %q", name)
	return cp
}

func testCheckpointMissing(t testing.TB, s storekit.CheckpointStore) {
	cp := mustCheckpoint(t, s, consumerName(t, "never-saved"))
	check.Equal(t, cp, storekit.Checkpoint{})
}

func testCheckpointRoundTrip(t testing.TB, s storekit.CheckpointStore) {
	ctx, name := context.Background(), consumerName(t, "round-trip")
	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(7, 3), 0))
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: checkpointAt(7, 3)})
	// Both halves of a position survive, up to their largest values.
	big := checkpointAt(1<<64-1, 1<<64-2)
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(7, 3), big, 4))
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: big, Fence: 4})
	// A claim: the same position under a higher fence.
	check.NoError(t, s.SaveCheckpoint(ctx, name, big, big, 1<<62))
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: big, Fence: 1 << 62})
}

func testCheckpointCompareAndSet(t testing.TB, s storekit.CheckpointStore) {
	ctx, name := context.Background(), consumerName(t, "cas")
	// No row yet: only a save that expects the start goes through.
	err := s.SaveCheckpoint(ctx, name, checkpointAt(1, 0), checkpointAt(2, 0), 0)
	requireConflict(t, err, eventstore.ErrCheckpointMoved, name, storekit.Checkpoint{})
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{}, "a refused save wrote something")

	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(5, 0), 0))
	err = s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(9, 0), 0)
	requireConflict(t, err, eventstore.ErrCheckpointMoved, name, storekit.Checkpoint{Position: checkpointAt(5, 0)})
	err = s.SaveCheckpoint(ctx, name, checkpointAt(5, 1), checkpointAt(9, 0), 0)
	requireConflict(t, err, eventstore.ErrCheckpointMoved, name, storekit.Checkpoint{Position: checkpointAt(5, 0)})
	check.Equal(t, mustCheckpoint(t, s, name).Position, checkpointAt(5, 0))
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(5, 0), checkpointAt(9, 0), 0))
	check.Equal(t, mustCheckpoint(t, s, name).Position, checkpointAt(9, 0))
}

func testCheckpointFencing(t testing.TB, s storekit.CheckpointStore) {
	ctx, name := context.Background(), consumerName(t, "fence")
	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(10, 0), 3))
	// A newer holder claims the checkpoint where it is.
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(10, 0), checkpointAt(10, 0), 4))
	// The former holder, paused, wakes up and tries to move it: refused,
	// although its expected position is right.
	err := s.SaveCheckpoint(ctx, name, checkpointAt(10, 0), checkpointAt(20, 0), 3)
	requireConflict(t, err, eventstore.ErrFenced, name, storekit.Checkpoint{Position: checkpointAt(10, 0), Fence: 4})
	// Unfenced saves cannot move a fenced checkpoint either.
	err = s.SaveCheckpoint(ctx, name, checkpointAt(10, 0), checkpointAt(20, 0), 0)
	requireConflict(t, err, eventstore.ErrFenced, name, storekit.Checkpoint{Position: checkpointAt(10, 0), Fence: 4})
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: checkpointAt(10, 0), Fence: 4})
	// The holder of the newest fence moves it.
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(10, 0), checkpointAt(20, 0), 4))
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Position: checkpointAt(20, 0), Fence: 4})
}

func testCheckpointReset(t testing.TB, s storekit.CheckpointStore) {
	ctx, name := context.Background(), consumerName(t, "reset")
	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(100, 0), 1))
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(100, 0), checkpointAt(40, 0), 1))
	check.Equal(t, mustCheckpoint(t, s, name).Position, checkpointAt(40, 0))
	check.NoError(t, s.SaveCheckpoint(ctx, name, checkpointAt(40, 0), eventstore.Start, 1))
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{Fence: 1}, "a reset keeps the fence")
	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(1, 0), 1))
}

func testCheckpointNames(t testing.TB, s storekit.CheckpointStore) {
	ctx := context.Background()
	a, b := consumerName(t, "a"), consumerName(t, "b")
	check.NoError(t, s.SaveCheckpoint(ctx, a, eventstore.Start, checkpointAt(3, 0), 2))
	check.Equal(t, mustCheckpoint(t, s, b), storekit.Checkpoint{})
	check.NoError(t, s.SaveCheckpoint(ctx, b, eventstore.Start, checkpointAt(8, 0), 0))
	check.Equal(t, mustCheckpoint(t, s, a), storekit.Checkpoint{Position: checkpointAt(3, 0), Fence: 2})
	check.Equal(t, mustCheckpoint(t, s, b), storekit.Checkpoint{Position: checkpointAt(8, 0)})
}

func testCheckpointRace(t testing.TB, s storekit.CheckpointStore) {
	ctx, name := context.Background(), consumerName(t, "race")
	check.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(1, 0), 0))
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.SaveCheckpoint(ctx, name, checkpointAt(1, 0), checkpointAt(uint64(10+i), 0), 0)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			check.Equal(t, won, -1, "racers %d and %d both moved the checkpoint from the same position", won, i)
			won = i
			continue
		}
		check.ErrorIs(t, err, eventstore.ErrCheckpointMoved, "racer %d", i)
	}
	check.True(t, won != -1, "no racer moved the checkpoint")
	check.Equal(t, mustCheckpoint(t, s, name).Position, checkpointAt(uint64(10+won), 0))
}

func testCheckpointBadNames(t testing.TB, s storekit.CheckpointStore) {
	ctx := context.Background()
	for _, name := range []string{"", "bad\x00name", strings.Repeat("x", storekit.MaxStreamLen+1)} {
		_, err := s.Checkpoint(ctx, name)
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "Checkpoint(%q)", name)
		err = s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(1, 0), 0)
		check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "SaveCheckpoint(%q)", name)
	}
}

func testCheckpointCanceled(t testing.TB, s storekit.CheckpointStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	name := consumerName(t, "canceled")
	check.ErrorIs(t, s.SaveCheckpoint(ctx, name, eventstore.Start, checkpointAt(1, 0), 0), context.Canceled)
	check.Equal(t, mustCheckpoint(t, s, name), storekit.Checkpoint{})
}

func requireConflict(t testing.TB, err error, sentinel error, name string, actual storekit.Checkpoint) {
	t.Helper()
	check.ErrorIs(t, err, sentinel)
	var ce *storekit.CheckpointConflictError
	check.ErrorAs(t, err, &ce)
	check.Equal(t, ce.Consumer, name)
	check.Equal(t, ce.Actual, actual)
	check.Contains(t, err.Error(), name)
}
