package commandtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

var idempotencyTests = []test{
	{"RedeliveredSequentially", testRedeliveredSequentially},
	{"RedeliveredConcurrently", testRedeliveredConcurrently},
	{"RacingDuplicateReportsStoredDecision", testRacingDuplicate},
	{"RedeliveredBelowSnapshot", func(t testing.TB, e *env) { testRedeliveredBelowSnapshot(t, e, e.store) }},
	{"RedeliveredBelowSnapshotWithoutCommandIndex", func(t testing.TB, e *env) {
		testRedeliveredBelowSnapshot(t, e, struct{ eventstore.Store }{e.store})
	}},
	{"RedeliveredBeyondMemory", testRedeliveredBeyondMemory},
	{"SameCommandIDOnAnotherAggregate", testSameIDOtherAggregate},
	{"IDReusedByAnotherCommandTypeIsRefused", testIDReusedByAnotherType},
	{"GeneratedCommandID", testGeneratedCommandID},
	{"NoEventsIsNotRecorded", testNoEvents},
}

func testRedeliveredSequentially(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("seq")
	msg := command.Message{ID: e.prefix + "cmd-1", Command: IncrementTwice{ID: id}}

	first, err := b.Dispatch(ctx, msg)
	check.NoError(t, err)
	check.True(t, !first.Duplicate)
	check.Equal(t, first.Version, uint64(1))
	check.Equal(t, first.Events, []any{Incremented{By: 1}, Incremented{By: 1}}, "events as decoded, never the *T Handle returned")
	check.Equal(t, first.CommandID, msg.ID)
	stored := e.events(id)
	check.Len(t, stored, 2)
	check.Equal(t, first.Position, stored[1].Position, "the position of the command's last event")

	for i := range 9 {
		again, err := b.Dispatch(ctx, msg)
		check.NoError(t, err, "redelivery %d", i)
		check.True(t, again.Duplicate, "redelivery %d must be a duplicate", i)
		check.Equal(t, again.Version, first.Version)
		check.Equal(t, again.Position, first.Position)
		check.Equal(t, again.Events, first.Events)
	}
	// Redelivered after other commands, and to a bus with a cold cache: the
	// earlier result, not the current version.
	_, err = b.Dispatch(ctx, command.Message{ID: e.prefix + "cmd-2", Command: Increment{ID: id, By: 5}})
	check.NoError(t, err)
	for _, bus := range []*command.Bus{b, e.bus(command.Options{NoCache: true}, 0)} {
		late, err := bus.Dispatch(ctx, msg)
		check.NoError(t, err)
		check.True(t, late.Duplicate)
		check.Equal(t, late.Version, uint64(1), "the version after the command's own events")
		check.Equal(t, late.Position, first.Position, "the position of its own last event, not the stream's")
		check.Equal(t, late.Events, first.Events)
	}
	check.Equal(t, e.load(id).Count, 7)
	check.Len(t, e.events(id), 3)
}

func testRedeliveredConcurrently(t testing.TB, e *env) {
	buses := []*command.Bus{e.bus(command.Options{}, 0), e.bus(command.Options{NoCache: true}, 0)}
	ctx := context.Background()
	id := e.id("conc")
	// The aggregate exists, and both buses have it loaded (or not cached).
	for i, b := range buses {
		_, err := b.Dispatch(ctx, command.Message{ID: fmt.Sprint(e.prefix, "warm", i), Command: Increment{ID: id}})
		check.NoError(t, err)
	}
	msg := command.Message{ID: e.prefix + "dup", Command: IncrementTwice{ID: id}}
	results := make([]command.Result, 10)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := dispatchUntilDone(ctx, buses[i%2], msg)
			if err != nil {
				t.Errorf("dispatch %d of %s: %v", i, msg.ID, err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	originals := 0
	for _, r := range results {
		if !r.Duplicate {
			originals++
		}
		check.Equal(t, r.Version, results[0].Version)
		check.Equal(t, r.Events, results[0].Events)
	}
	check.Equal(t, originals, 1, "exactly one dispatch appends; the others are duplicates")
	check.Equal(t, e.load(id).Count, 4)
	check.Len(t, e.events(id), 4)
}

// testRedeliveredBelowSnapshot redelivers a command whose events are older
// than the snapshot a cold bus loads from: the bus must find the command ID
// in the store, through its CommandIndex or by scanning.
func testRedeliveredBelowSnapshot(t testing.TB, e *env, store eventstore.Store) {
	ctx := context.Background()
	id := e.id("snap")
	old := command.Message{ID: e.prefix + "old", Command: IncrementTwice{ID: id}}
	warm := e.busOn(store, command.Options{}, 5)
	first, err := warm.Dispatch(ctx, old)
	check.NoError(t, err)
	for i := range 20 {
		_, err := warm.Dispatch(ctx, command.Message{ID: fmt.Sprint(e.prefix, "n", i), Command: Increment{ID: id}})
		check.NoError(t, err)
	}
	snap, ok, err := e.snaps.LoadSnapshot(ctx, "counter-"+id)
	check.NoError(t, err)
	check.True(t, ok, "20 events with SnapshotEvery 5 must leave a snapshot")
	check.Less(t, first.Version, snap.Version, "the command must be older than the snapshot")

	cold := e.busOn(store, command.Options{NoCache: true}, 5)
	again, err := cold.Dispatch(ctx, old)
	check.NoError(t, err)
	check.True(t, again.Duplicate, "command %s, redelivered below the snapshot at %d, was not found in the stream and decided again at %d",
		old.ID, snap.Version, again.Version)
	check.Equal(t, again.Version, first.Version)
	check.Equal(t, again.Events, first.Events)
	// A new command on the same cold path is not mistaken for a duplicate.
	fresh, err := cold.Dispatch(ctx, command.Message{ID: e.prefix + "fresh", Command: Increment{ID: id}})
	check.NoError(t, err)
	check.True(t, !fresh.Duplicate)
	check.Equal(t, e.load(id).Count, 23)
}

// testRedeliveredBeyondMemory redelivers, to a cold bus, commands whose
// events lie far below the snapshot it loads from, on a store with a
// command index and on one without: the instance remembers none of them,
// and the bus does not ask the store before deciding a command it cannot
// answer for. It must still return their earlier outcome and append
// nothing: after the store refuses the re-decided events (their IDs are
// the command's), and before returning a rejection that the command's
// first dispatch did not get.
func testRedeliveredBeyondMemory(t testing.TB, e *env) {
	for _, c := range []struct {
		name  string
		store eventstore.Store
	}{
		{"CommandIndex", e.store},
		{"Scan", struct{ eventstore.Store }{e.store}},
	} {
		check.Run(t, c.name, func(t testing.TB) { redeliverBeyondMemory(t, e, c.store, e.id("beyond"+c.name)) })
	}
}

func redeliverBeyondMemory(t testing.TB, e *env, store eventstore.Store, id string) {
	ctx := context.Background()
	warm := e.busOn(store, command.Options{}, 5)
	at := command.Message{ID: "at", Command: IncrementAt{ID: id, At: 0}}
	old := command.Message{ID: "old", Command: IncrementTwice{ID: id}}
	firstAt, err := warm.Dispatch(ctx, at)
	check.NoError(t, err)
	firstOld, err := warm.Dispatch(ctx, old)
	check.NoError(t, err)
	e.increments(warm, id, 20)
	snap, ok := e.snapshot(id)
	check.True(t, ok, "23 events with SnapshotEvery 5 must leave a snapshot")
	check.Less(t, firstOld.Version, snap.Version, "the commands must lie below the snapshot")

	cold := e.busOn(store, command.Options{NoCache: true}, 5)
	for _, c := range []struct {
		msg   command.Message
		first command.Result
		why   string
	}{
		{at, firstAt, "decided again it is refused (the count is no longer 0)"},
		{old, firstOld, "decided again its append is refused"},
	} {
		again, err := cold.Dispatch(ctx, c.msg)
		check.NoError(t, err, "command %s: %s, but it succeeded before", c.msg.ID, c.why)
		check.True(t, again.Duplicate, "command %s", c.msg.ID)
		check.Equal(t, again.Version, c.first.Version, "command %s", c.msg.ID)
		check.Equal(t, again.Events, c.first.Events, "command %s", c.msg.ID)
	}
	fresh, err := cold.Dispatch(ctx, command.Message{ID: "fresh", Command: Increment{ID: id}})
	check.NoError(t, err)
	check.True(t, !fresh.Duplicate)
	_, err = cold.Dispatch(ctx, command.Message{ID: "refused", Command: IncrementAt{ID: id, At: 0}})
	check.ErrorIs(t, err, ErrWrongCount, "a new command refused now is refused")
	check.Equal(t, e.load(id).Count, 24)
	check.Len(t, e.events(id), 24)
}

func testSameIDOtherAggregate(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		res, err := b.Dispatch(ctx, command.Message{ID: e.prefix + "shared", Command: Increment{ID: e.id(name)}})
		check.NoError(t, err)
		check.True(t, !res.Duplicate, "a command ID is scoped to its aggregate")
	}
	check.Equal(t, e.load(e.id("b")).Count, 1)
}

// testIDReusedByAnotherType: an ID that produced events (or a recorded
// rejection) for one type of command, sent again with a command of
// another type to the same aggregate, is refused with a
// CommandIDReusedError, never answered as the other command's duplicate,
// and appends nothing; the same command again is still a duplicate. (The
// suite's command types are registered with the codec, which names them.)
func testIDReusedByAnotherType(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("reuse")
	first := command.Message{ID: e.prefix + "reused", Command: Increment{ID: id, By: 1}}
	_, err := b.Dispatch(ctx, first)
	check.NoError(t, err)
	_, err = b.Dispatch(ctx, command.Message{ID: e.prefix + "rejected", Command: Reject{ID: id}, RecordRejection: true})
	check.True(t, err != nil, "want an error, got nil")
	for _, bus := range []*command.Bus{b, e.bus(command.Options{NoCache: true}, 0)} {
		for _, msg := range []command.Message{
			{ID: first.ID, Command: IncrementTwice{ID: id}},
			{ID: e.prefix + "rejected", Command: Increment{ID: id, By: 7}, RecordRejection: true},
		} {
			res, err := bus.Dispatch(ctx, msg)
			var reused *command.CommandIDReusedError
			check.ErrorAs(t, err, &reused, "%T under ID %s", msg.Command, msg.ID)
			check.ErrorIs(t, err, command.ErrCommandIDReused)
			check.Equal(t, reused.CommandID, msg.ID)
			check.True(t, !res.Duplicate, "not answered as the other command's outcome")
			check.True(t, !res.Rejected, "a refusal of the bus, not the aggregate's")
		}
		again, err := bus.Dispatch(ctx, first)
		check.NoError(t, err)
		check.True(t, again.Duplicate, "the same command under its ID is still a duplicate")
	}
	check.Len(t, e.events(id), 2, "one increment and one recorded rejection, nothing more")
	check.Equal(t, e.load(id).Count, 1)
}

func testGeneratedCommandID(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("gen")
	r1, err := b.Dispatch(ctx, command.Message{Command: Increment{ID: id}})
	check.NoError(t, err)
	r2, err := b.Dispatch(ctx, command.Message{Command: Increment{ID: id}})
	check.NoError(t, err)
	check.True(t, len(r1.CommandID) > 0)
	check.True(t, r1.CommandID != r2.CommandID, "each dispatch without an ID is a new command, got %q twice", r1.CommandID)
	check.True(t, !r2.Duplicate)
	evs := e.events(id)
	check.Len(t, evs, 2)
	check.Equal(t, evs[0].Metadata.CommandID, r1.CommandID)
}

func testNoEvents(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	ctx := context.Background()
	id := e.id("none")
	res, err := b.Dispatch(ctx, command.Message{ID: e.prefix + "n", Command: Nothing{ID: id}})
	check.NoError(t, err)
	check.Len(t, res.Events, 0)
	check.True(t, !res.Duplicate)
	check.Len(t, e.events(id), 0, "a command that decides nothing writes nothing")
}
