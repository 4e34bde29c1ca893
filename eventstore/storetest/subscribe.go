package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

var subscribeTests = []test{
	{"CatchUpThenLive", testCatchUpThenLive},
	{"FiltersLiveEvents", testSubscribeFilters},
	{"ResumesAfterEveryPosition", testResumeEveryPosition},
	{"CancelReleasesTheSubscriber", testSubscribeCancel},
	{"StoppingTheRangeEndsIt", testSubscribeBreak},
	{"CloseEndsSubscriptions", testSubscribeClose},
}

// subscription runs a Subscribe in a goroutine and hands its events to the
// test one at a time.
type subscription struct {
	events chan eventstore.Event
	done   chan struct{}
	err    error // the error that ended it; read after done is closed
	cancel context.CancelFunc
}

func subscribe(t testing.TB, s eventstore.Store, after eventstore.Position, f eventstore.Filter) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscription{events: make(chan eventstore.Event), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(sub.done)
		for e, err := range s.Subscribe(ctx, after, f) {
			if err != nil {
				sub.err = err
				return
			}
			select {
			case sub.events <- e:
			case <-ctx.Done():
				sub.err = ctx.Err()
				return
			}
		}
	}()
	t.Cleanup(func() { sub.cancel(); <-sub.done })
	return sub
}

// take waits for the next n events.
func (sub *subscription) take(t testing.TB, n int) []eventstore.Event {
	t.Helper()
	out := make([]eventstore.Event, 0, n)
	deadline := time.After(waitLimit)
	for len(out) < n {
		select {
		case e := <-sub.events:
			out = append(out, e)
		case <-sub.done:
			t.Fatalf("subscription ended early: after %d of %d events: %v", len(out), n, sub.err)
		case <-deadline:
			t.Fatalf("subscription stalled: got %d of %d events within %s", len(out), n, waitLimit)
		}
	}
	return out
}

// stop cancels the subscription and returns the error that ended it.
func (sub *subscription) stop(t testing.TB) error {
	t.Helper()
	sub.cancel()
	select {
	case <-sub.done:
		return sub.err
	case <-time.After(waitLimit):
		t.Fatal("a canceled subscription did not end")
		return nil
	}
}

func testCatchUpThenLive(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	var written []eventstore.EventData
	for i := range 5 {
		batch := events("x", 1+i%2)
		mustAppend(t, s, n.stream(string(rune('a'+i%3))), eventstore.Any, batch...)
		written = append(written, batch...)
	}
	sub := subscribe(t, s, eventstore.Start, n.filter())
	caughtUp := sub.take(t, len(written))
	check.Equal(t, recordedIDs(caughtUp), ids(written))

	for i := range 4 {
		live := events("x", 1+i%3)
		mustAppend(t, s, n.stream("live"), eventstore.Any, live...)
		got := sub.take(t, len(live))
		check.Equal(t, recordedIDs(got), ids(live), "live batch %d", i)
		caughtUp = append(caughtUp, got...)
	}
	requireIncreasing(t, caughtUp)
	err := sub.stop(t)
	check.True(t, isCanceled(err), "a canceled subscription ends with the context's error, got %v", err)
}

func testSubscribeFilters(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	other := newNames(t)
	byType := subscribe(t, s, eventstore.Start, eventstore.Filter{
		StreamPrefixes: n.filter().StreamPrefixes, Types: []string{"wanted", "marker"}})
	byPrefix := subscribe(t, s, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{n.stream("keep")}})

	mustAppend(t, s, n.stream("keep-1"), eventstore.Any, event("wanted", "1"), event("unwanted", "2"))
	mustAppend(t, s, other.stream("keep-1"), eventstore.Any, event("wanted", "other category"))
	mustAppend(t, s, n.stream("drop-1"), eventstore.Any, event("unwanted", "3"), event("wanted", "4"))
	mustAppend(t, s, n.stream("keep-2"), eventstore.Any, event("marker", "end"))

	payloads := func(evs []eventstore.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, string(e.Data))
		}
		return out
	}
	check.Equal(t, payloads(byType.take(t, 3)), []string{`{"payload":"1"}`, `{"payload":"4"}`, `{"payload":"end"}`})
	check.Equal(t, payloads(byPrefix.take(t, 3)), []string{`{"payload":"1"}`, `{"payload":"2"}`, `{"payload":"end"}`})
}

func testResumeEveryPosition(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	var written []eventstore.EventData
	for i := range 6 {
		batch := events("x", 1+i%3) // multi-event appends: resume inside them too
		mustAppend(t, s, n.stream(string(rune('a'+i%2))), eventstore.Any, batch...)
		written = append(written, batch...)
	}
	all := readAll(t, s, eventstore.Start, n.filter())
	check.Equal(t, recordedIDs(all), ids(written))

	marker := event("marker", "end")
	mustAppend(t, s, n.stream("z"), eventstore.NoStream, marker)
	for i, e := range all {
		sub := subscribe(t, s, e.Position, n.filter())
		want := append(ids(written[i+1:]), marker.ID)
		got := sub.take(t, len(want))
		check.Equal(t, recordedIDs(got), want, "resuming after event %d at %s", i, e.Position)
		sub.stop(t)
	}
}

func testSubscribeCancel(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	// Canceled while waiting for live events.
	idle := subscribe(t, s, eventstore.Start, n.filter())
	err := idle.stop(t)
	check.True(t, isCanceled(err), "got %v", err)

	// Canceled after taking events.
	mustAppend(t, s, n.stream("a"), eventstore.NoStream, events("x", 3)...)
	busy := subscribe(t, s, eventstore.Start, n.filter())
	busy.take(t, 2)
	err = busy.stop(t)
	check.True(t, isCanceled(err), "got %v", err)

	// The store goes on serving others.
	mustAppend(t, s, n.stream("a"), eventstore.Exact(2), event("x", "after"))
	again := subscribe(t, s, eventstore.Start, n.filter())
	check.Len(t, again.take(t, 4), 4)
}

func testSubscribeBreak(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	mustAppend(t, s, n.stream("a"), eventstore.NoStream, events("x", 3)...)
	ended := make(chan uuid.UUID)
	go func() {
		for e, err := range s.Subscribe(context.Background(), eventstore.Start, n.filter()) {
			if err == nil {
				ended <- e.ID
			}
			break
		}
		close(ended)
	}()
	select {
	case _, open := <-ended:
		check.True(t, open, "the subscription ended before its first event")
	case <-time.After(waitLimit):
		t.Fatal("no event arrived")
	}
	select {
	case _, open := <-ended:
		check.True(t, !open, "the subscription went on after the range stopped")
	case <-time.After(waitLimit):
		t.Fatal("a subscription whose range stopped did not return")
	}
}

func testSubscribeClose(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	mustAppend(t, s, n.stream("a"), eventstore.NoStream, event("x", "1"))
	sub := subscribe(t, s, eventstore.Start, n.filter())
	sub.take(t, 1)
	check.NoError(t, s.Close())
	select {
	case <-sub.done:
		check.True(t, errors.Is(sub.err, eventstore.ErrClosed), "a subscription on a closed store ends with ErrClosed, got %v", sub.err)
	case <-time.After(waitLimit):
		t.Fatal("closing the store did not end its subscription")
	}
	_, err := s.Append(context.Background(), n.stream("a"), eventstore.Any, event("x", "2"))
	check.ErrorIs(t, err, eventstore.ErrClosed)
	check.NoError(t, s.Close(), "Close is idempotent")
}
