package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// indexedStore is an event store with a command index: the command bus
// asks it whether a redelivered command already appended to a stream.
type indexedStore interface {
	eventstore.Store
	storekit.CommandIndex
}

// commandIndexTests check a [storekit.CommandIndex]. The command bus trusts
// the index's answer for exactly-once: a command reported absent is
// decided and appended again, so every store must answer alike, found or
// not found, for every kind of stream and ID.
var commandIndexTests = []testCase[indexedStore]{
	{"FoundAndNotFound", testCommandFound},
	{"EmptyIDIsNotFound", testCommandEmptyID},
	{"MultiEventCommand", testCommandSpan},
	{"SameIDInOtherStreams", testCommandOtherStreams},
	{"AfterLaterAppends", testCommandAfterLater},
	{"NamedByTheBus", testCommandNamedByTheBus},
	{"BadStreamName", testCommandBadStream},
	{"UnstorableCommandID", testCommandUnstorableID},
	{"CanceledContext", testCommandCanceled},
}

// commandEvents returns n events recording command id.
func commandEvents(id string, n int) []eventstore.EventData {
	out := events("x", n)
	for i := range out {
		out[i].Metadata.CommandID = id
	}
	return out
}

// requireCommand checks that the index reports command id in stream with
// exactly the versions and position of the append want.
func requireCommand(t testing.TB, s indexedStore, stream, id string, want eventstore.AppendResult) {
	t.Helper()
	got, found, err := s.CommandResult(context.Background(), stream, id)
	check.NoError(t, err, "command %q in stream %q", id, stream)
	check.True(t, found, "command %q in stream %q must be found", id, stream)
	want.Duplicate = true
	check.Equal(t, got, want, "command %q in stream %q: the versions and position of its append, as a duplicate", id, stream)
}

// requireNoCommand checks that the index reports no command id in stream,
// without an error.
func requireNoCommand(t testing.TB, s indexedStore, stream, id, why string) {
	t.Helper()
	got, found, err := s.CommandResult(context.Background(), stream, id)
	check.NoError(t, err, "command %q in stream %q (%s)", id, stream, why)
	check.True(t, !found, "command %q in stream %q must not be found: %s", id, stream, why)
	check.Equal(t, got, eventstore.AppendResult{}, "command %q in stream %q: nothing found, no result", id, stream)
}

func testCommandFound(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream := n.stream("a")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 2)...)
	r := mustAppend(t, s, stream, eventstore.Exact(1), commandEvents("c1", 1)...)
	requireCommand(t, s, stream, "c1", r)

	requireNoCommand(t, s, stream, "c2", "no event records it")
	requireNoCommand(t, s, stream, "C1", "command IDs are compared exactly")
	requireNoCommand(t, s, stream, "c", "a prefix of a stored ID is another ID")
	requireNoCommand(t, s, n.stream("absent"), "c1", "the stream does not exist")
}

// testCommandEmptyID: an empty command ID means "no command", and events
// without one are not one command's events. Every store answers "not
// found", never an error: the bus asks with whatever ID it has.
func testCommandEmptyID(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream := n.stream("a")
	requireNoCommand(t, s, stream, "", "an empty ID on an absent stream")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 3)...)
	mustAppend(t, s, stream, eventstore.Exact(2), commandEvents("c1", 1)...)
	requireNoCommand(t, s, stream, "", "events without a command ID record no command")
}

func testCommandSpan(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream := n.stream("a")
	before := mustAppend(t, s, stream, eventstore.NoStream, commandEvents("c1", 2)...)
	span := mustAppend(t, s, stream, eventstore.Exact(1), commandEvents("c2", 3)...)
	after := mustAppend(t, s, stream, eventstore.Exact(4), commandEvents("c3", 2)...)
	check.Equal(t, [2]uint64{span.FirstVersion, span.LastVersion}, [2]uint64{2, 4})

	requireCommand(t, s, stream, "c1", before)
	requireCommand(t, s, stream, "c2", span)
	requireCommand(t, s, stream, "c3", after)
}

func testCommandOtherStreams(t testing.TB, s indexedStore) {
	n := newNames(t)
	a, b, c := n.stream("a"), n.stream("b"), n.stream("a2")
	mustAppend(t, s, b, eventstore.NoStream, events("x", 3)...)
	inA := mustAppend(t, s, a, eventstore.NoStream, commandEvents("shared", 1)...)
	inB := mustAppend(t, s, b, eventstore.Exact(2), commandEvents("shared", 2)...)
	mustAppend(t, s, a, eventstore.Exact(0), commandEvents("only-a", 1)...)

	requireCommand(t, s, a, "shared", inA)
	requireCommand(t, s, b, "shared", inB)
	requireNoCommand(t, s, b, "only-a", "a command is scoped to its stream")
	requireNoCommand(t, s, c, "shared", "a stream whose name extends another's is another stream")
	requireNoCommand(t, s, n.category, "shared", "a stream whose name is a prefix of another's is another stream")
}

func testCommandAfterLater(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream := n.stream("a")
	first := mustAppend(t, s, stream, eventstore.NoStream, commandEvents("c0", 2)...)
	var last eventstore.AppendResult
	for i := range 50 {
		evs := commandEvents(fmt.Sprint("later-", i), 1+i%3)
		if i%5 == 0 {
			evs = events("x", 2) // no command
		}
		last = mustAppend(t, s, stream, eventstore.Any, evs...)
	}
	requireCommand(t, s, stream, "c0", first)
	requireCommand(t, s, stream, "later-49", last)
	requireNoCommand(t, s, stream, "later-50", "never appended")

	// A repeated append of a command is absorbed, and changes nothing.
	again := mustAppend(t, s, stream, eventstore.NoStream, eventsOf(readStream(t, s, stream, eventstore.Forward(0))[:2])...)
	check.True(t, again.Duplicate)
	requireCommand(t, s, stream, "c0", first)
}

// busEvents returns n events of command id in stream, named as the command
// bus names them ([storekit.CommandEventID]).
func busEvents(stream, id string, n int) []eventstore.EventData {
	out := commandEvents(id, n)
	for i := range out {
		out[i].ID = storekit.CommandEventID(stream, id, i)
	}
	return out
}

// testCommandNamedByTheBus: a store may find the appends of the command bus
// by their IDs (see [storekit.CommandIDsDerived]); they are found as any
// other command's events, next to commands named otherwise, and the names
// of one stream's commands find nothing in another.
func testCommandNamedByTheBus(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream, other := n.stream("a"), n.stream("b")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 2)...)
	one := mustAppend(t, s, stream, eventstore.Exact(1), busEvents(stream, "c1", 1)...)
	three := mustAppend(t, s, stream, eventstore.Exact(2), busEvents(stream, "c2", 3)...)
	plain := mustAppend(t, s, stream, eventstore.Exact(5), commandEvents("c3", 2)...)
	next := mustAppend(t, s, stream, eventstore.Exact(7), busEvents(stream, "c4", 2)...)
	mustAppend(t, s, stream, eventstore.Exact(9), events("x", 1)...)
	// Named for this stream, appended to another: not this stream's command.
	elsewhere := mustAppend(t, s, other, eventstore.NoStream, busEvents(stream, "c5", 1)...)

	requireCommand(t, s, stream, "c1", one)
	requireCommand(t, s, stream, "c2", three)
	requireCommand(t, s, stream, "c3", plain)
	requireCommand(t, s, stream, "c4", next)
	requireCommand(t, s, other, "c5", elsewhere)
	requireNoCommand(t, s, stream, "c5", "its events are in another stream")
	requireNoCommand(t, s, other, "c1", "named for another stream, and not in this one")

	// A command named by the bus for one event but appended with a second
	// event of its own: the command's events are all of them.
	mixed := busEvents(stream, "c6", 1)
	mixed = append(mixed, commandEvents("c6", 1)...)
	both := mustAppend(t, s, stream, eventstore.Exact(10), mixed...)
	requireCommand(t, s, stream, "c6", both)

	// Events named for a command but recording another: the names do not
	// make them that command's.
	wrong := busEvents(stream, "c7", 1)
	wrong[0].Metadata.CommandID = "c8"
	moved := mustAppend(t, s, stream, eventstore.Exact(12), wrong...)
	requireNoCommand(t, s, stream, "c7", "no event records it")
	requireCommand(t, s, stream, "c8", moved)
}

// eventsOf returns recorded events as events to append again.
func eventsOf(recorded []eventstore.Event) []eventstore.EventData {
	out := make([]eventstore.EventData, len(recorded))
	for i, e := range recorded {
		out[i] = e.EventData
	}
	return out
}

func testCommandBadStream(t testing.TB, s indexedStore) {
	n := newNames(t)
	for _, stream := range []string{"", "$all", "$" + n.stream("sys"), n.stream(strings.Repeat("s", storekit.MaxStreamLen)), n.stream("a\x00b")} {
		for _, id := range []string{"c1", ""} {
			_, found, err := s.CommandResult(context.Background(), stream, id)
			check.ErrorIs(t, err, eventstore.ErrInvalidArgument, "stream %q, command %q", stream, id)
			check.True(t, !found)
		}
	}
}

func testCommandCanceled(t testing.TB, s indexedStore) {
	n := newNames(t)
	stream := n.stream("a")
	mustAppend(t, s, stream, eventstore.NoStream, commandEvents("c1", 1)...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, found, err := s.CommandResult(ctx, stream, "c1")
	check.True(t, err != nil, "want an error, got nil")
	check.True(t, isCanceled(err), "lookup on a canceled context: %v", err)
	check.True(t, !found)
}
