package commandtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/internal/busprobe"
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
func testStaleCache(t *testing.T, e *env) {
	ctx := context.Background()
	blue, green := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("stale")

	_, err := blue.Dispatch(ctx, command.Message{ID: "c1", Command: Increment{ID: id}})
	require.NoError(t, err)
	require.Equal(t, 1, busprobe.CachedAggregates(blue), "blue caches the counter at 1")
	_, err = green.Dispatch(ctx, command.Message{ID: "c2", Command: Increment{ID: id}})
	require.NoError(t, err)

	res, err := blue.Dispatch(ctx, command.Message{ID: "c3", Command: CheckCount{ID: id, Want: 2}})
	require.NoError(t, err, "blue must see green's increment, not its cached count of 1")
	assert.Equal(t, uint64(1), res.Version)

	_, err = blue.Dispatch(ctx, command.Message{ID: "c4", Command: CheckCount{ID: id, Want: 1}})
	require.ErrorIs(t, err, ErrWrongCount)
}

// testStaleCacheDuplicate redelivers to one bus a command that the other
// already applied: it is found at once, without deciding on stale state.
func testStaleCacheDuplicate(t *testing.T, e *env) {
	ctx := context.Background()
	blue, green := e.bus(command.Options{}, 0), e.bus(command.Options{}, 0)
	id := e.id("redelivered")

	_, err := blue.Dispatch(ctx, command.Message{ID: "first", Command: Increment{ID: id}})
	require.NoError(t, err)
	applied, err := green.Dispatch(ctx, command.Message{ID: "second", Command: Increment{ID: id, By: 5}})
	require.NoError(t, err)

	again, err := blue.Dispatch(ctx, command.Message{ID: "second", Command: Increment{ID: id, By: 5}})
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	assert.Equal(t, 1, again.Attempts, "found without a conflict round trip")
	assert.Equal(t, applied.Version, again.Version)
	assert.Equal(t, applied.Events, again.Events)
	assert.Equal(t, 6, e.load(id).Count)
}
