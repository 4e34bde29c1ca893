package storetest

import (
	"context"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

var readTests = []test{
	{"ForwardFromVersion", testReadForward},
	{"BackwardFromVersion", testReadBackward},
	{"AbsentStreamYieldsNothing", testReadAbsent},
	{"LongStreamsAreReadWhole", testReadLong},
	{"StoppingEarlyReleasesTheStore", testReadStopEarly},
	{"LimitEndsTheRead", testReadLimit},
	{"ReadAllInPositionOrder", testReadAllOrder},
	{"ReadAllFilters", testReadAllFilters},
	{"ReadAllAfterEveryPosition", testReadAllAfter},
	{"HeadIsTheNewestEvent", testHead},
	{"LargeEventsArePagedByBytes", testLargeEventsArePagedByBytes},
}

// versionsOf returns the stream versions of events, in order.
func versionsOf(evs []eventstore.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Version
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	if from <= to {
		for v := from; v <= to; v++ {
			out = append(out, v)
		}
		return out
	}
	for v := from; ; v-- {
		out = append(out, v)
		if v == to {
			return out
		}
	}
}

func testReadForward(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("fwd")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 4)...)
	mustAppend(t, s, stream, eventstore.Exact(3), events("x", 6)...) // versions 0..9

	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Forward(0))), span(0, 9))
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Forward(3))), span(3, 9))
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Forward(9))), span(9, 9))
	check.Len(t, readStream(t, s, stream, eventstore.Forward(10)), 0)
	check.Len(t, readStream(t, s, stream, eventstore.Forward(eventstore.End)), 0)
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.ReadOptions{})), span(0, 9), "the zero options read forward from 0")
}

func testReadBackward(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("bwd")
	batch := events("x", 10)
	mustAppend(t, s, stream, eventstore.NoStream, batch...)

	got := readStream(t, s, stream, eventstore.Backward(eventstore.End))
	check.Equal(t, versionsOf(got), span(9, 0))
	for i, e := range got {
		check.Equal(t, e.ID, batch[9-i].ID)
	}
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Backward(4))), span(4, 0))
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Backward(0))), span(0, 0))
	check.Equal(t, versionsOf(readStream(t, s, stream, eventstore.Backward(25))), span(9, 0), "from past the end starts at the last event")
}

func testReadAbsent(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	mustAppend(t, s, n.stream("present"), eventstore.NoStream, events("x", 2)...)
	for _, opts := range []eventstore.ReadOptions{eventstore.Forward(0), eventstore.Backward(eventstore.End), eventstore.Forward(5)} {
		check.Len(t, readStream(t, s, n.stream("absent"), opts), 0)
	}
	// A stream whose name is a prefix of another's is a different stream.
	check.Len(t, readStream(t, s, n.stream("pres"), eventstore.Forward(0)), 0)
}

func testReadLong(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("long")
	const total = 2500 // longer than any sensible page
	var written []eventstore.EventData
	for len(written) < total {
		batch := events("x", 500)
		mustAppend(t, s, stream, eventstore.Any, batch...)
		written = append(written, batch...)
	}
	mustAppend(t, s, n.stream("other"), eventstore.NoStream, events("x", 3)...)

	fwd := readStream(t, s, stream, eventstore.Forward(0))
	check.Equal(t, recordedIDs(fwd), ids(written))
	check.Equal(t, versionsOf(fwd), span(0, total-1))
	requireIncreasing(t, fwd)

	bwd := readStream(t, s, stream, eventstore.Backward(eventstore.End))
	check.Equal(t, versionsOf(bwd), span(total-1, 0))

	all := readAll(t, s, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{stream}})
	check.Equal(t, recordedIDs(all), ids(written))
}

func testReadStopEarly(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("stop")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 1200)...)
	ctx := context.Background()
	for range 3 {
		seen := 0
		for _, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			check.NoError(t, err)
			seen++
			if seen == 5 {
				break
			}
		}
		check.Equal(t, seen, 5)
		for _, err := range s.ReadAll(ctx, eventstore.Start, n.filter()) {
			check.NoError(t, err)
			break
		}
		// The store must still take writes: the readers let go.
		mustAppend(t, s, stream, eventstore.Any, event("x", "after"))
	}
}

func testReadAllOrder(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	var written []eventstore.EventData
	for i := range 30 {
		batch := events("x", 1+i%4)
		mustAppend(t, s, n.stream(string(rune('a'+i%5))), eventstore.Any, batch...)
		written = append(written, batch...)
	}
	got := readAll(t, s, eventstore.Start, n.filter())
	check.Equal(t, recordedIDs(got), ids(written), "sequential appends are read back in append order")
	requireIncreasing(t, got)
}

func testReadAllFilters(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	other := newNames(t)
	mustAppend(t, s, n.stream("1"), eventstore.Any, event("order.placed", "1"), event("order.paid", "1"))
	mustAppend(t, s, other.stream("1"), eventstore.Any, event("order.placed", "x"))
	mustAppend(t, s, n.stream("2"), eventstore.Any, event("order.shipped", "2"), event("order.placed", "2"))

	typesOf := func(evs []eventstore.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.StreamID[len(e.StreamID)-1:]+":"+e.Type)
		}
		return out
	}
	mine := n.filter()
	check.Equal(t, typesOf(readAll(t, s, eventstore.Start, mine)),
		[]string{"1:order.placed", "1:order.paid", "2:order.shipped", "2:order.placed"})

	mine.Types = []string{"order.placed"}
	check.Equal(t, typesOf(readAll(t, s, eventstore.Start, mine)), []string{"1:order.placed", "2:order.placed"})

	mine.Types = []string{"order.paid", "order.shipped"}
	check.Equal(t, typesOf(readAll(t, s, eventstore.Start, mine)), []string{"1:order.paid", "2:order.shipped"})

	both := eventstore.Filter{StreamPrefixes: []string{n.stream("2"), other.stream("")}, Types: []string{"order.placed"}}
	got := readAll(t, s, eventstore.Start, both)
	check.Len(t, got, 2)
	check.Equal(t, got[0].StreamID, other.stream("1"))
	check.Equal(t, got[1].StreamID, n.stream("2"))

	mine.Types = []string{"no.such.type"}
	check.Len(t, readAll(t, s, eventstore.Start, mine), 0)
}

func testReadAllAfter(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	for i := range 8 {
		mustAppend(t, s, n.stream(string(rune('a'+i%3))), eventstore.Any, events("x", 1+i%3)...)
	}
	all := readAll(t, s, eventstore.Start, n.filter())
	check.True(t, len(all) > 0)
	for i, e := range all {
		rest := readAll(t, s, e.Position, n.filter())
		check.Equal(t, recordedIDs(rest), recordedIDs(all[i+1:]), "reading after event %d at %s", i, e.Position)
	}
	check.Len(t, readAll(t, s, all[len(all)-1].Position, n.filter()), 0)
}

func testReadLimit(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("limited")
	const total = storekit.DefaultPageSize + 88
	for i := 0; i < total; i += 100 {
		mustAppend(t, s, stream, eventstore.Any, events("x", min(100, total-i))...)
	}
	cases := []struct {
		opts eventstore.ReadOptions
		want []uint64
	}{
		{eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}, []uint64{total - 1}},
		{eventstore.ReadOptions{From: 10, Limit: 3}, []uint64{10, 11, 12}},
		{eventstore.ReadOptions{From: 5, Backward: true, Limit: 3}, []uint64{5, 4, 3}},
		{eventstore.ReadOptions{From: total - 2, Limit: 10}, []uint64{total - 2, total - 1}},
		{eventstore.ReadOptions{From: 1, Backward: true, Limit: 10}, []uint64{1, 0}},
	}
	for _, c := range cases {
		check.Equal(t, versionsOf(readStream(t, s, stream, c.opts)), c.want, "%+v", c.opts)
	}
	across := readStream(t, s, stream, eventstore.ReadOptions{From: 0, Limit: storekit.DefaultPageSize + 10})
	check.Len(t, across, storekit.DefaultPageSize+10, "a limit beyond one page reads exactly that many")
	check.Len(t, readStream(t, s, stream, eventstore.ReadOptions{Limit: -1}), total, "a limit that is not positive reads everything")
}
