package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// testUseAfterClose checks that every method of a closed store fails with
// [eventstore.ErrClosed] at once, those of the storekit interfaces it
// implements included, and that Close may be called again.
func testUseAfterClose(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("closed")
	mustAppend(t, s, stream, eventstore.NoStream, event("x", "1"))
	check.NoError(t, s.Close())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	_, err := s.Append(ctx, stream, eventstore.Any, event("x", "2"))
	check.ErrorIs(t, err, eventstore.ErrClosed, "Append")
	reads := map[string]func() (int, error){
		"ReadStream": func() (int, error) { return drain(s.ReadStream(ctx, stream, eventstore.Forward(0))) },
		"ReadAll":    func() (int, error) { return drain(s.ReadAll(ctx, eventstore.Start, n.filter())) },
		"Subscribe":  func() (int, error) { return drain(s.Subscribe(ctx, eventstore.Start, n.filter())) },
	}
	for name, read := range reads {
		events, err := read()
		check.ErrorIs(t, err, eventstore.ErrClosed, name)
		check.Equal(t, events, 0, "%s yields no event from a closed store", name)
	}
	for name, call := range consumerCallsOn(s, n, consumerName(t, "closed")) {
		check.ErrorIs(t, call(ctx), eventstore.ErrClosed, name)
	}
	check.NoError(t, s.Close(), "Close is idempotent")
}

// consumerCallsOn returns a call of each storekit interface that s
// implements, by the interface's method name: on a closed store, each must
// fail with ErrClosed as the event methods do.
func consumerCallsOn(s eventstore.Store, n names, consumer string) map[string]func(context.Context) error {
	calls := make(map[string]func(context.Context) error)
	if cs, ok := s.(storekit.CheckpointStore); ok {
		calls["Checkpoint"] = func(ctx context.Context) error { _, err := cs.Checkpoint(ctx, consumer); return err }
		calls["SaveCheckpoint"] = func(ctx context.Context) error {
			return cs.SaveCheckpoint(ctx, consumer, eventstore.Start, eventstore.Position{Major: 1}, 0)
		}
	}
	if ls, ok := s.(storekit.LeaseStore); ok {
		calls["AcquireLease"] = func(ctx context.Context) error {
			_, _, err := ls.AcquireLease(ctx, consumer, "holder", time.Second)
			return err
		}
	}
	if ds, ok := s.(storekit.DeadLetterStore); ok {
		calls["CountDeadLetters"] = func(ctx context.Context) error { _, err := ds.CountDeadLetters(ctx, consumer); return err }
	}
	if ss, ok := s.(storekit.SnapshotStore); ok {
		calls["LoadSnapshot"] = func(ctx context.Context) error { _, _, err := ss.LoadSnapshot(ctx, n.stream("snap")); return err }
	}
	if ci, ok := s.(storekit.CommandIndex); ok {
		calls["CommandResult"] = func(ctx context.Context) error { _, _, err := ci.CommandResult(ctx, n.stream("cmd"), "c"); return err }
	}
	return calls
}

// drain ranges over a read until its first error, returning how many
// events came before it.
func drain(seq func(func(eventstore.Event, error) bool)) (events int, err error) {
	for _, err := range seq {
		if err != nil {
			return events, err
		}
		events++
	}
	return events, nil
}

// testCloseWhileBusy closes a store while appenders and subscribers run:
// nothing hangs or panics, every append either succeeds or fails with
// ErrClosed (or, for one caught in flight, its own context), every
// subscription ends with ErrClosed, and every acknowledged append was
// seen whole by the subscribers that were running.
func testCloseWhileBusy(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	const appenders, subscribers = 8, 2
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	var wg sync.WaitGroup
	acked := make([][]eventstore.AppendResult, appenders)
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := n.stream(fmt.Sprint("busy", a))
			for i := 0; ; i++ {
				r, err := s.Append(ctx, stream, eventstore.Any, event("x", fmt.Sprint(i)), event("x", fmt.Sprint(i)))
				if err != nil {
					if !errors.Is(err, eventstore.ErrClosed) && !isCanceled(err) {
						t.Errorf("an append racing Close fails with ErrClosed, not %v", err)
					}
					return
				}
				acked[a] = append(acked[a], r)
			}
		}()
	}
	seen := make([]map[eventstore.Position]bool, subscribers)
	ended := make([]error, subscribers)
	for i := range subscribers {
		seen[i] = make(map[eventstore.Position]bool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e, err := range s.Subscribe(ctx, eventstore.Start, n.filter()) {
				if err != nil {
					ended[i] = err
					return
				}
				seen[i][e.Position] = true
			}
		}()
	}
	// Let some appends land, then close under them.
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if got := len(readAll(t, s, eventstore.Start, n.filter())); got >= 4*appenders {
			break
		}
		time.Sleep(time.Millisecond)
	}
	check.NoError(t, s.Close())
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("appenders or subscribers still running after Close")
	}
	for i, err := range ended {
		check.ErrorIs(t, err, eventstore.ErrClosed, "subscriber %d ends with ErrClosed", i)
	}
	total := 0
	for _, rs := range acked {
		total += len(rs)
	}
	check.Less(t, 0, total, "some appends were acknowledged before Close")
}

// testExtremeVersionsAndPositions checks values at the edges of the
// contract's uint64 versions and positions, which SQL stores keep in
// signed 64-bit columns: they must be answered as what they mean, never
// as a database error or a wrapped-around number.
func testExtremeVersionsAndPositions(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	stream := n.stream("edges")
	mustAppend(t, s, stream, eventstore.NoStream, events("x", 2)...)

	for _, v := range []uint64{math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64} {
		_, err := s.Append(ctx, stream, eventstore.Exact(v), event("x", "far"))
		wrongVersion(t, err, stream, eventstore.Exact(v), eventstore.Exact(1))
		_, err = s.Append(ctx, n.stream(fmt.Sprint("absent", v)), eventstore.Exact(v), event("x", "far"))
		wrongVersion(t, err, n.stream(fmt.Sprint("absent", v)), eventstore.Exact(v), eventstore.NoStream)

		check.Len(t, readStream(t, s, stream, eventstore.Forward(v)), 0, "reading forward from version %d", v)
		check.Len(t, readStream(t, s, stream, eventstore.Backward(v)), 2, "reading backward from version %d", v)
	}
	check.Len(t, readStream(t, s, stream, eventstore.Forward(0)), 2, "nothing was written")
	for _, after := range []eventstore.Position{
		{Major: math.MaxInt64, Minor: 0},
		{Major: math.MaxInt64 + 1, Minor: 0},
		{Major: math.MaxUint64, Minor: math.MaxUint64},
	} {
		check.Len(t, readAll(t, s, after, n.filter()), 0, "reading all after %s", after)
	}
}
