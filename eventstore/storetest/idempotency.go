package storetest

import (
	"context"
	"math"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

var idempotencyTests = []test{
	{"RepeatedAppendWritesNothing", testRepeatWritesNothing},
	{"RepeatAfterLaterAppends", testRepeatAfterLater},
	{"RepeatContradictingExpectedVersion", testRepeatWrongPlace},
	{"PartialRepeatIsRejected", testPartialRepeat},
	{"SameIDInAnotherStreamIsIndependent", testIDScopedToStream},
}

func testRepeatWritesNothing(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("repeat")
	batch := events("x", 3)
	first := mustAppend(t, s, stream, eventstore.NoStream, batch...)
	check.True(t, !first.Duplicate)

	for _, expected := range []eventstore.ExpectedVersion{eventstore.NoStream, eventstore.Any} {
		again, err := s.Append(context.Background(), stream, expected, batch...)
		check.NoError(t, err, "repeating an append expecting %s", expected)
		check.True(t, again.Duplicate, "a repeat must be reported as a duplicate")
		check.Equal(t, again.FirstVersion, first.FirstVersion)
		check.Equal(t, again.LastVersion, first.LastVersion)
		check.Equal(t, again.Position, first.Position, "a repeat reports the position of the earlier append")
	}
	// A retried prefix of the batch is a repeat too: those events are there.
	again := mustAppend(t, s, stream, eventstore.NoStream, batch[:2]...)
	check.True(t, again.Duplicate)
	check.Equal(t, again.LastVersion, uint64(1))

	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Equal(t, recordedIDs(got), ids(batch), "repeats must write nothing")
	check.Len(t, readAll(t, s, eventstore.Start, n.filter()), 3)
}

func testRepeatAfterLater(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("later")
	a := events("x", 2)
	b := events("x", 2)
	mustAppend(t, s, stream, eventstore.NoStream, a...)
	rb := mustAppend(t, s, stream, eventstore.Exact(1), b...)

	// A publisher retries the second append after it succeeded: with the
	// expected version it used then, and with Any.
	for _, expected := range []eventstore.ExpectedVersion{eventstore.Exact(1), eventstore.Any, eventstore.StreamExists} {
		r := mustAppend(t, s, stream, expected, b...)
		check.True(t, r.Duplicate, "expecting %s", expected)
		check.Equal(t, r.FirstVersion, uint64(2))
		check.Equal(t, r.LastVersion, uint64(3))
		check.Equal(t, r.Position, rb.Position)
	}
	// And the first append, now two events behind the end.
	r := mustAppend(t, s, stream, eventstore.NoStream, a...)
	check.True(t, r.Duplicate)
	check.Equal(t, r.FirstVersion, uint64(0))
	check.Len(t, readStream(t, s, stream, eventstore.Forward(0)), 4)
}

func testRepeatWrongPlace(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("place")
	a := events("x", 2)
	mustAppend(t, s, stream, eventstore.NoStream, a...)
	mustAppend(t, s, stream, eventstore.Exact(1), events("x", 1)...)

	// The same events, but the caller says they belong after version 2:
	// that is not the append that stored them; nor after the last version
	// there is, whose next one wraps around to 0.
	for _, expected := range []eventstore.ExpectedVersion{eventstore.Exact(2), eventstore.Exact(0), eventstore.StreamExists,
		eventstore.Exact(math.MaxUint64)} {
		_, err := s.Append(context.Background(), stream, expected, a...)
		check.ErrorIs(t, err, eventstore.ErrEventIDConflict, "expecting %s", expected)
		var conflict *eventstore.EventIDConflictError
		check.ErrorAs(t, err, &conflict)
		check.True(t, conflict.Displaced, "expecting %s", expected)
		check.Equal(t, conflict.Stream, stream)
		check.Equal(t, conflict.StoredVersion, uint64(0), "the events are stored from version 0")
		check.Equal(t, conflict.Expected, expected)
		check.Contains(t, err.Error(), stream)
		check.Contains(t, err.Error(), "already stored from version 0")
	}
	check.Len(t, readStream(t, s, stream, eventstore.Forward(0)), 3)
}

func testPartialRepeat(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	stream := n.stream("partial")
	batch := events("x", 3)
	mustAppend(t, s, stream, eventstore.NoStream, batch...)

	cases := map[string][]eventstore.EventData{
		"stored then new":    {batch[2], event("x", "new")},
		"new then stored":    {event("x", "new"), batch[0]},
		"stored, reordered":  {batch[1], batch[0]},
		"stored, with a gap": {batch[0], batch[2]},
	}
	for name, attempt := range cases {
		_, err := s.Append(ctx, stream, eventstore.Any, attempt...)
		check.True(t, err != nil, "%s: want an error, got nil", name)
		check.ErrorIs(t, err, eventstore.ErrEventIDConflict, name)
		var conflict *eventstore.EventIDConflictError
		check.ErrorAs(t, err, &conflict, name)
		check.Equal(t, conflict.Stream, stream, name)
		stored := map[int]uint64{}
		for i, e := range batch {
			for j, a := range attempt {
				if a.ID == e.ID {
					stored[j] = uint64(i)
				}
			}
		}
		v, ok := stored[conflict.Index]
		check.True(t, ok, "%s: the conflict names event %d, which is not a stored one", name, conflict.Index)
		check.Equal(t, conflict.EventID, attempt[conflict.Index].ID, name)
		check.Equal(t, conflict.StoredVersion, v, name)
		check.Contains(t, err.Error(), stream, name)
	}
	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Equal(t, recordedIDs(got), ids(batch), "rejected partial repeats wrote events")
}

func testIDScopedToStream(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	batch := events("x", 2)
	mustAppend(t, s, n.stream("one"), eventstore.NoStream, batch...)
	r := mustAppend(t, s, n.stream("two"), eventstore.NoStream, batch...)
	check.True(t, !r.Duplicate, "an event ID is unique within its stream; another stream may hold it")
	check.Len(t, readAll(t, s, eventstore.Start, n.filter()), 4)
}
