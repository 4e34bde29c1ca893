package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// pagedStreamTests check a [storekit.PagedStreams] store: what its page
// reader yields through [storekit.ReadStreamWith] is what its ReadStream
// yields, event for event and error for error, whatever the page buffer
// held before.
var pagedStreamTests = []testCase[pagedStore]{
	{"PageReaderYieldsWhatReadStreamYields", testPagedStreamsAsReadStream},
	{"PageReaderFailsAsReadStreamFails", testPagedStreamsFailAsReadStream},
}

type pagedStore interface {
	eventstore.Store
	storekit.PagedStreams
}

// streamRead is one read's outcome: its events, then the error that ended
// it, if any.
type streamRead struct {
	Events []eventstore.Event
	Err    string
}

// readPaged collects a read through s's page reader into buf, stopping
// after stop events when stop is positive.
func readPaged(ctx context.Context, s pagedStore, stream string, opts eventstore.ReadOptions, buf *storekit.PageBuffer, stop int) streamRead {
	var out streamRead
	read, size, ok := storekit.StreamPagesOf(s)
	if !ok {
		return streamRead{Err: fmt.Sprintf("storekit.StreamPagesOf refuses the page reader of %T", s)}
	}
	storekit.ReadStreamWith(ctx, stream, opts, read, size, buf, func(e eventstore.Event, err error) bool {
		if err != nil {
			out.Err = err.Error()
			return false
		}
		out.Events = append(out.Events, e)
		return stop <= 0 || len(out.Events) < stop
	})
	return out
}

// readIterated collects the same read through s.ReadStream.
func readIterated(ctx context.Context, s eventstore.Store, stream string, opts eventstore.ReadOptions, stop int) streamRead {
	var out streamRead
	for e, err := range s.ReadStream(ctx, stream, opts) {
		if err != nil {
			out.Err = err.Error()
			break
		}
		out.Events = append(out.Events, e)
		if stop > 0 && len(out.Events) == stop {
			break
		}
	}
	return out
}

func testPagedStreamsAsReadStream(t testing.TB, s pagedStore) {
	ctx := context.Background()
	n := newNames(t)
	_, size, ok := storekit.StreamPagesOf(s)
	check.True(t, ok, "%T hands out a page reader that storekit.StreamPagesOf refuses: StreamPages must return the store itself as the owner", s)
	if size <= 0 {
		size = storekit.DefaultPageSize
	}
	long, short := n.stream("long"), n.stream("short")
	total := 2*size + 3 // three pages, the last short
	mustAppend(t, s, long, eventstore.NoStream, events("x", total)...)
	mustAppend(t, s, short, eventstore.NoStream, events("y", 3)...)
	last := uint64(total - 1)

	reads := []struct {
		stream string
		opts   eventstore.ReadOptions
		stop   int
	}{
		{long, eventstore.Forward(0), 0},
		{long, eventstore.Forward(uint64(size) - 1), 0},
		{long, eventstore.Forward(last), 0},
		{long, eventstore.Forward(last + 1), 0},
		{long, eventstore.Forward(eventstore.End), 0},
		{long, eventstore.Backward(eventstore.End), 0},
		{long, eventstore.Backward(uint64(size)), 0},
		{long, eventstore.Backward(0), 0},
		{long, eventstore.ReadOptions{From: 2, Limit: size + 1}, 0},
		{long, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}, 0},
		{long, eventstore.Forward(0), size + 2}, // the consumer stops in the second page
		{short, eventstore.Forward(0), 0},
		{short, eventstore.Backward(eventstore.End), 0},
		{n.stream("absent"), eventstore.Forward(0), 0},
		{n.stream("absent"), eventstore.Backward(eventstore.End), 0},
		{"", eventstore.Forward(0), 0},
		{"bad\x00name", eventstore.Forward(0), 0},
	}
	// One buffer for every read, as a repository keeps one: no read may
	// see what an earlier one left, whether it ran to its end or not.
	var buf storekit.PageBuffer
	for _, r := range reads {
		what := fmt.Sprintf("stream %q, %+v, stopping after %d", r.stream, r.opts, r.stop)
		want := readIterated(ctx, s, r.stream, r.opts, r.stop)
		check.Equal(t, readPaged(ctx, s, r.stream, r.opts, &buf, r.stop), want, what)
		check.Equal(t, readPaged(ctx, s, r.stream, r.opts, nil, r.stop), want, what+", without a buffer")
	}
	buf.Reset()
	check.Equal(t, readPaged(ctx, s, long, eventstore.Forward(0), &buf, 0), readIterated(ctx, s, long, eventstore.Forward(0), 0), "after Reset")
}

func testPagedStreamsFailAsReadStream(t testing.TB, s pagedStore) {
	n := newNames(t)
	stream := n.stream("failing")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 3)...)
	var buf storekit.PageBuffer

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	want := readIterated(canceled, s, stream, eventstore.Forward(0), 0)
	check.Equal(t, readPaged(canceled, s, stream, eventstore.Forward(0), &buf, 0), want, "canceled context")

	check.NoError(t, s.Close())
	want = readIterated(context.Background(), s, stream, eventstore.Forward(0), 0)
	check.True(t, want.Err != "", "a read of a closed store fails")
	check.Equal(t, readPaged(context.Background(), s, stream, eventstore.Forward(0), &buf, 0), want, "closed store")
}
