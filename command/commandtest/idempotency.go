package commandtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
)

var idempotencyTests = []test{
	{"RedeliveredSequentially", testRedeliveredSequentially},
	{"RedeliveredConcurrently", testRedeliveredConcurrently},
	{"RacingDuplicateReportsStoredDecision", testRacingDuplicate},
	{"RedeliveredBelowSnapshot", func(t *testing.T, e *env) { testRedeliveredBelowSnapshot(t, e, e.store) }},
	{"RedeliveredBelowSnapshotWithoutCommandIndex", func(t *testing.T, e *env) {
		testRedeliveredBelowSnapshot(t, e, struct{ eventstore.Store }{e.store})
	}},
	{"RedeliveredBeyondScanLimit", testRedeliveredBeyondScanLimit},
	{"SameCommandIDOnAnotherAggregate", testSameIDOtherAggregate},
	{"IDReusedByAnotherCommandTypeIsRefused", testIDReusedByAnotherType},
	{"GeneratedCommandID", testGeneratedCommandID},
	{"NoEventsIsNotRecorded", testNoEvents},
}

func testRedeliveredSequentially(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("seq")
	msg := command.Message{ID: e.prefix + "cmd-1", Command: IncrementTwice{ID: id}}

	first, err := b.Dispatch(ctx, msg)
	require.NoError(t, err)
	assert.False(t, first.Duplicate)
	assert.Equal(t, uint64(1), first.Version)
	assert.Equal(t, []any{Incremented{By: 1}, Incremented{By: 1}}, first.Events, "events as decoded, never the *T Handle returned")
	assert.Equal(t, msg.ID, first.CommandID)
	stored := e.events(id)
	require.Len(t, stored, 2)
	assert.Equal(t, stored[1].Position, first.Position, "the position of the command's last event")

	for i := range 9 {
		again, err := b.Dispatch(ctx, msg)
		require.NoError(t, err, "redelivery %d", i)
		assert.True(t, again.Duplicate, "redelivery %d must be a duplicate", i)
		assert.Equal(t, first.Version, again.Version)
		assert.Equal(t, first.Position, again.Position)
		assert.Equal(t, first.Events, again.Events)
	}
	// Redelivered after other commands, and to a bus with a cold cache: the
	// earlier result, not the current version.
	_, err = b.Dispatch(ctx, command.Message{ID: e.prefix + "cmd-2", Command: Increment{ID: id, By: 5}})
	require.NoError(t, err)
	for _, bus := range []*command.Bus{b, e.bus(command.Options{NoCache: true}, 0)} {
		late, err := bus.Dispatch(ctx, msg)
		require.NoError(t, err)
		assert.True(t, late.Duplicate)
		assert.Equal(t, uint64(1), late.Version, "the version after the command's own events")
		assert.Equal(t, first.Position, late.Position, "the position of its own last event, not the stream's")
		assert.Equal(t, first.Events, late.Events)
	}
	assert.Equal(t, 7, e.load(id).Count)
	assert.Len(t, e.events(id), 3)
}

func testRedeliveredConcurrently(t *testing.T, e *env) {
	buses := []*command.Bus{e.bus(command.Options{}, 0), e.bus(command.Options{NoCache: true}, 0)}
	ctx := context.Background()
	id := e.id("conc")
	// The aggregate exists, and both buses have it loaded (or not cached).
	for i, b := range buses {
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint(e.prefix, "warm", i), Command: Increment{ID: id}})
		require.NoError(t, err)
	}
	msg := command.Message{ID: e.prefix + "dup", Command: IncrementTwice{ID: id}}
	results := make([]command.Result, 10)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := dispatchUntilDone(ctx, buses[i%2], msg)
			assert.NoError(t, err)
			results[i] = res
		}()
	}
	wg.Wait()
	originals := 0
	for _, r := range results {
		if !r.Duplicate {
			originals++
		}
		assert.Equal(t, results[0].Version, r.Version)
		assert.Equal(t, results[0].Events, r.Events)
	}
	assert.Equal(t, 1, originals, "exactly one dispatch appends; the others are duplicates")
	assert.Equal(t, 4, e.load(id).Count)
	assert.Len(t, e.events(id), 4)
}

// testRedeliveredBelowSnapshot redelivers a command whose events are older
// than the snapshot a cold bus loads from: the bus must find the command ID
// in the store, through its CommandIndex or by scanning.
func testRedeliveredBelowSnapshot(t *testing.T, e *env, store eventstore.Store) {
	ctx := context.Background()
	id := e.id("snap")
	old := command.Message{ID: e.prefix + "old", Command: IncrementTwice{ID: id}}
	warm := e.busOn(store, command.Options{}, 5)
	first, err := warm.Dispatch(ctx, old)
	require.NoError(t, err)
	for i := range 20 {
		_, err := warm.Dispatch(ctx, command.Message{ID: fmt.Sprint(e.prefix, "n", i), Command: Increment{ID: id}})
		require.NoError(t, err)
	}
	snap, ok, err := e.snaps.LoadSnapshot(ctx, "counter-"+id)
	require.NoError(t, err)
	require.True(t, ok, "20 events with SnapshotEvery 5 must leave a snapshot")
	require.Greater(t, snap.Version, first.Version, "the command must be older than the snapshot")

	cold := e.busOn(store, command.Options{NoCache: true}, 5)
	again, err := cold.Dispatch(ctx, old)
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	assert.Equal(t, first.Version, again.Version)
	assert.Equal(t, first.Events, again.Events)
	// A new command on the same cold path is not mistaken for a duplicate.
	fresh, err := cold.Dispatch(ctx, command.Message{ID: e.prefix + "fresh", Command: Increment{ID: id}})
	require.NoError(t, err)
	assert.False(t, fresh.Duplicate)
	assert.Equal(t, 23, e.load(id).Count)
}

// testRedeliveredBeyondScanLimit redelivers, to a cold bus that may scan
// only 2 events of a store without a command index, commands whose events
// lie far below the snapshot it loads from. The bounded scan cannot find
// them; the bus must still return their earlier outcome and append nothing:
// after the store refuses the re-decided events (their IDs are the
// command's), and before returning a rejection that the command's first
// dispatch did not get.
func testRedeliveredBeyondScanLimit(t *testing.T, e *env) {
	ctx := context.Background()
	store := struct{ eventstore.Store }{e.store} // no command index
	id := e.id("limit")
	warm := e.busOn(store, command.Options{}, 5)
	at := command.Message{ID: "at", Command: IncrementAt{ID: id, At: 0}}
	old := command.Message{ID: "old", Command: IncrementTwice{ID: id}}
	firstAt, err := warm.Dispatch(ctx, at)
	require.NoError(t, err)
	firstOld, err := warm.Dispatch(ctx, old)
	require.NoError(t, err)
	e.increments(warm, id, 20)
	snap, ok := e.snapshot(id)
	require.True(t, ok, "23 events with SnapshotEvery 5 must leave a snapshot")
	require.Greater(t, snap.Version, firstOld.Version+2, "the commands must be further below the snapshot than the scan limit")

	cold := e.busOn(store, command.Options{NoCache: true, ScanLimit: 2}, 5)
	for _, c := range []struct {
		msg   command.Message
		first command.Result
		why   string
	}{
		{at, firstAt, "decided again it is refused (the count is no longer 0)"},
		{old, firstOld, "decided again its append is refused"},
	} {
		again, err := cold.Dispatch(ctx, c.msg)
		require.NoError(t, err, "command %s: %s, but it succeeded before", c.msg.ID, c.why)
		assert.True(t, again.Duplicate, "command %s", c.msg.ID)
		assert.Equal(t, c.first.Version, again.Version, "command %s", c.msg.ID)
		assert.Equal(t, c.first.Events, again.Events, "command %s", c.msg.ID)
	}
	fresh, err := cold.Dispatch(ctx, command.Message{ID: "fresh", Command: Increment{ID: id}})
	require.NoError(t, err)
	assert.False(t, fresh.Duplicate)
	_, err = cold.Dispatch(ctx, command.Message{ID: "refused", Command: IncrementAt{ID: id, At: 0}})
	require.ErrorIs(t, err, ErrWrongCount, "a new command refused now is refused")
	assert.Equal(t, 24, e.load(id).Count)
	assert.Len(t, e.events(id), 24)
}

func testSameIDOtherAggregate(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		res, err := b.Dispatch(ctx, command.Message{ID: e.prefix + "shared", Command: Increment{ID: e.id(name)}})
		require.NoError(t, err)
		assert.False(t, res.Duplicate, "a command ID is scoped to its aggregate")
	}
	assert.Equal(t, 1, e.load(e.id("b")).Count)
}

// testIDReusedByAnotherType: an ID that produced events (or a recorded
// rejection) for one type of command, sent again with a command of
// another type to the same aggregate, is refused with a
// CommandIDReusedError, never answered as the other command's duplicate,
// and appends nothing; the same command again is still a duplicate. (The
// suite's command types are registered with the codec, which names them.)
func testIDReusedByAnotherType(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("reuse")
	first := command.Message{ID: e.prefix + "reused", Command: Increment{ID: id, By: 1}}
	_, err := b.Dispatch(ctx, first)
	require.NoError(t, err)
	_, err = b.Dispatch(ctx, command.Message{ID: e.prefix + "rejected", Command: Reject{ID: id}, RecordRejection: true})
	require.Error(t, err)
	for _, bus := range []*command.Bus{b, e.bus(command.Options{NoCache: true}, 0)} {
		for _, msg := range []command.Message{
			{ID: first.ID, Command: IncrementTwice{ID: id}},
			{ID: e.prefix + "rejected", Command: Increment{ID: id, By: 7}, RecordRejection: true},
		} {
			res, err := bus.Dispatch(ctx, msg)
			var reused *command.CommandIDReusedError
			require.ErrorAs(t, err, &reused, "%T under ID %s", msg.Command, msg.ID)
			assert.ErrorIs(t, err, command.ErrCommandIDReused)
			assert.Equal(t, msg.ID, reused.CommandID)
			assert.False(t, res.Duplicate, "not answered as the other command's outcome")
			assert.False(t, res.Rejected, "a refusal of the bus, not the aggregate's")
		}
		again, err := bus.Dispatch(ctx, first)
		require.NoError(t, err)
		assert.True(t, again.Duplicate, "the same command under its ID is still a duplicate")
	}
	assert.Len(t, e.events(id), 2, "one increment and one recorded rejection, nothing more")
	assert.Equal(t, 1, e.load(id).Count)
}

func testGeneratedCommandID(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("gen")
	r1, err := b.Dispatch(ctx, command.Message{Command: Increment{ID: id}})
	require.NoError(t, err)
	r2, err := b.Dispatch(ctx, command.Message{Command: Increment{ID: id}})
	require.NoError(t, err)
	assert.NotEmpty(t, r1.CommandID)
	assert.NotEqual(t, r1.CommandID, r2.CommandID, "each dispatch without an ID is a new command")
	assert.False(t, r2.Duplicate)
	evs := e.events(id)
	require.Len(t, evs, 2)
	assert.Equal(t, r1.CommandID, evs[0].Metadata.CommandID)
}

func testNoEvents(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("none")
	res, err := b.Dispatch(ctx, command.Message{ID: e.prefix + "n", Command: Nothing{ID: id}})
	require.NoError(t, err)
	assert.Empty(t, res.Events)
	assert.False(t, res.Duplicate)
	assert.Empty(t, e.events(id), "a command that decides nothing writes nothing")
}
