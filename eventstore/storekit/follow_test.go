package storekit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// fakeLog is a page reader over a slice, with injectable failures.
type fakeLog struct {
	mu       sync.Mutex
	events   []eventstore.Event
	failures []error // returned, in order, by the next reads
	reads    int
}

func (l *fakeLog) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		p := eventstore.Position{Major: uint64(len(l.events) + 1)}
		l.events = append(l.events, eventstore.Event{Position: p, EventData: eventstore.EventData{Type: "x"}})
	}
}

func (l *fakeLog) read(_ context.Context, after eventstore.Position, f eventstore.Filter, limit int) (storekit.Page, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	if len(l.failures) > 0 {
		err := l.failures[0]
		l.failures = l.failures[1:]
		return storekit.Page{}, err
	}
	page := storekit.Page{Through: after}
	for _, e := range l.events {
		if !after.Before(e.Position) || !f.Match(&e) {
			continue
		}
		page.Events = append(page.Events, e)
		if len(page.Events) == limit {
			page.Through, page.Full = e.Position, true
			return page, nil
		}
	}
	if n := len(l.events); n > 0 && after.Before(l.events[n-1].Position) {
		page.Through = l.events[n-1].Position
	}
	return page, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func majors(t *testing.T, seq func(func(eventstore.Event, error) bool), n int) ([]uint64, error) {
	t.Helper()
	var got []uint64
	var last error
	for e, err := range seq {
		if err != nil {
			last = err
			break
		}
		got = append(got, e.Position.Major)
		if len(got) == n {
			break
		}
	}
	return got, last
}

func TestReadPagesReadsPastPageBoundaries(t *testing.T) {
	l := &fakeLog{}
	l.add(25)
	got, err := majors(t, storekit.ReadPages(context.Background(), eventstore.Position{Major: 3}, eventstore.Filter{}, l.read, 4), -1)
	require.NoError(t, err)
	assert.Len(t, got, 22)
	assert.Equal(t, uint64(4), got[0])
	assert.Equal(t, uint64(25), got[21])
}

func TestFollowRetriesTransientErrorsWithoutSkipping(t *testing.T) {
	l := &fakeLog{}
	l.add(5)
	flaky := errors.New("connection reset")
	l.failures = []error{flaky, flaky}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seq := storekit.Follow(ctx, eventstore.Start, eventstore.Filter{}, l.read, storekit.FollowOptions{
		PageSize:     2,
		PollInterval: time.Millisecond,
		Transient:    func(err error) bool { return errors.Is(err, flaky) },
		Logger:       quiet,
	})
	got, err := majors(t, seq, 5)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, got)
}

func TestFollowEndsOnPermanentErrors(t *testing.T) {
	l := &fakeLog{}
	broken := errors.New("disk on fire")
	l.failures = []error{broken}
	seq := storekit.Follow(context.Background(), eventstore.Start, eventstore.Filter{}, l.read, storekit.FollowOptions{
		PollInterval: time.Millisecond,
		Transient:    func(error) bool { return false },
	})
	_, err := majors(t, seq, 1)
	assert.ErrorIs(t, err, broken)
}

func TestFollowWakesOnChangeAndEndsOnClose(t *testing.T) {
	l := &fakeLog{}
	var changes storekit.Notifier
	closed := make(chan struct{})
	seq := storekit.Follow(context.Background(), eventstore.Start, eventstore.Filter{}, l.read, storekit.FollowOptions{
		Changed: changes.Changed,
		Closed:  closed,
	})
	results := make(chan error, 1)
	seen := make(chan uint64)
	go func() {
		for e, err := range seq {
			if err != nil {
				results <- err
				return
			}
			seen <- e.Position.Major
		}
	}()
	for i := 1; i <= 3; i++ {
		l.add(1)
		changes.Notify()
		select {
		case m := <-seen:
			assert.Equal(t, uint64(i), m)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "a notified follower did not read the new event")
		}
	}
	close(closed)
	select {
	case err := <-results:
		assert.ErrorIs(t, err, eventstore.ErrClosed)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "closing did not end the follower")
	}
}

func TestFollowStopsWhenTheContextEnds(t *testing.T) {
	l := &fakeLog{}
	l.add(3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []uint64
	var last error
	for e, err := range storekit.Follow(ctx, eventstore.Start, eventstore.Filter{}, l.read, storekit.FollowOptions{}) {
		if err != nil {
			last = err
			break
		}
		got = append(got, e.Position.Major)
		if len(got) == 3 {
			cancel()
		}
	}
	assert.Equal(t, []uint64{1, 2, 3}, got)
	assert.ErrorIs(t, last, context.Canceled)
}
