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
