package commandtest

import (
	"context"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/internal/busprobe"
	"github.com/cairn-es/cairn/internal/check"
)

var cacheTests = []test{
	{"StaleCacheNeverDecides", testStaleCache},
	{"StaleCacheFindsOthersCommands", testStaleCacheDuplicate},
	{"StaleCacheNoOpIsDecidedAgain", testStaleCacheNoOp},
	{"StaleCacheDecisionIsNeverStored", testStaleCacheDecision},
	{"StaleCacheRecordedRejectionIsNeverStored", testStaleCacheRecordedRejection},
}

// testStaleCache has two buses (two deployments) share a store, each with
// its own cache. A decision that appends nothing (a rejection, or an
// accepted no-op) raises no version conflict, so a cache that served the
// state it last saw would decide on a past that the other bus has moved on
// from; the bus must decide on the stream as it is.
func testStaleCache(t testing.TB, e *env) {
	ctx := context.Background()
	blue, green := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("stale")

	_, err := blue.Dispatch(ctx, command.Message{ID: "c1", Command: Increment{ID: id}})
	check.NoError(t, err)
	check.Equal(t, busprobe.CachedAggregates(blue), 1, "blue caches the counter at 1")
	_, err = green.Dispatch(ctx, command.Message{ID: "c2", Command: Increment{ID: id}})
	check.NoError(t, err)

	res, err := blue.Dispatch(ctx, command.Message{ID: "c3", Command: CheckCount{ID: id, Want: 2}})
	check.NoError(t, err, "blue must see green's increment, not its cached count of 1")
	check.Equal(t, res.Version, uint64(1))

	_, err = blue.Dispatch(ctx, command.Message{ID: "c4", Command: CheckCount{ID: id, Want: 1}})
	check.ErrorIs(t, err, ErrWrongCount)
}

// testStaleCacheDuplicate redelivers to one bus a command that the other
// already applied: it is found at once, without deciding on stale state.
func testStaleCacheDuplicate(t testing.TB, e *env) {
	ctx := context.Background()
	blue, green := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("redelivered")

	_, err := blue.Dispatch(ctx, command.Message{ID: "first", Command: Increment{ID: id}})
	check.NoError(t, err)
	applied, err := green.Dispatch(ctx, command.Message{ID: "second", Command: Increment{ID: id, By: 5}})
	check.NoError(t, err)

	again, err := blue.Dispatch(ctx, command.Message{ID: "second", Command: Increment{ID: id, By: 5}})
	check.NoError(t, err)
	check.True(t, again.Duplicate)
	check.Equal(t, again.Attempts, 1, "found without a conflict round trip")
	check.Equal(t, again.Version, applied.Version)
	check.Equal(t, again.Events, applied.Events)
	check.Equal(t, e.load(id).Count, 6)
}

// staleBlue has blue cache a counter at 1 and green move it to 2 behind
// blue's back.
func staleBlue(t testing.TB, e *env, name string) (blue *command.Bus, id string) {
	ctx := context.Background()
	blue, green := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id = e.id(name)
	_, err := blue.Dispatch(ctx, command.Message{ID: "c1", Command: Increment{ID: id}})
	check.NoError(t, err)
	_, err = green.Dispatch(ctx, command.Message{ID: "c2", Command: Increment{ID: id}})
	check.NoError(t, err)
	return blue, id
}

// testStaleCacheNoOp: a decision that the cached state accepts as a no-op
// appends nothing, so no version check would catch it; the bus must make
// it again on the stream as it is, which refuses it.
func testStaleCacheNoOp(t testing.TB, e *env) {
	blue, id := staleBlue(t, e, "stale-noop")
	res, err := blue.Dispatch(context.Background(), command.Message{ID: "c3", Command: CheckCount{ID: id, Want: 1}})
	check.ErrorIs(t, err, ErrWrongCount, "the count is 2, whatever blue's cache held")
	check.True(t, res.Rejected)
	check.Equal(t, res.Attempts, 1, "deciding again on the refreshed state is not a retry")
}

// testStaleCacheDecision: a decision on the cached state that appends is
// refused by its expected version, and decided again on the stream as it
// is: IncrementAt{At: 1} would add to a count of 1, but the count is 2.
func testStaleCacheDecision(t testing.TB, e *env) {
	blue, id := staleBlue(t, e, "stale-decision")
	res, err := blue.Dispatch(context.Background(), command.Message{ID: "c3", Command: IncrementAt{ID: id, At: 1}})
	check.ErrorIs(t, err, ErrWrongCount)
	check.Equal(t, res.Attempts, 1, "a decision on a stale cache that is refused is made again on the stream as it is, not retried")
	check.Equal(t, e.load(id).Count, 2, "nothing of the stale decision was stored")
}

// testStaleCacheRecordedRejection: a rejection that is recorded appends,
// so it too is caught by its expected version: on the stream as it is the
// command is accepted, and no rejection is stored.
func testStaleCacheRecordedRejection(t testing.TB, e *env) {
	blue, id := staleBlue(t, e, "stale-recorded")
	ctx := context.Background()
	res, err := blue.Dispatch(ctx, command.Message{ID: "c3", Command: CheckCount{ID: id, Want: 2}, RecordRejection: true})
	check.NoError(t, err, "the count is 2: accepted, never a recorded rejection made on the cached 1")
	check.True(t, !res.Rejected)
	again, err := blue.Dispatch(ctx, command.Message{ID: "c3", Command: CheckCount{ID: id, Want: 2}, RecordRejection: true})
	check.NoError(t, err, "no rejection was recorded for c3")
	check.True(t, !again.Rejected)
}
