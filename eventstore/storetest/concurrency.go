package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

var concurrencyTests = []test{
	{"RacingExactAppendsOneWinnerEach", testRacingAppends},
	{"ParallelStreamsWithLiveSubscriber", testParallelStreamsSubscribed},
}

const writers = 16

// testRacingAppends lines up 16 writers that all read the same version and
// append with it as the expected version, round after round: in each round
// exactly one wins and the other 15 get the conflict error, and in the end
// every version was written exactly once.
func testRacingAppends(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	stream := n.stream("race")
	ctx := context.Background()
	const rounds = 12

	var winners []uuid.UUID
	for round := range rounds {
		expected := eventstore.NoStream
		if round > 0 {
			expected = eventstore.Exact(uint64(round - 1))
		}
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     []uuid.UUID
			lost    int
			unknown []error
		)
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := event("x", "racer")
				<-start
				_, err := s.Append(ctx, stream, expected, e)
				mu.Lock()
				defer mu.Unlock()
				var wv *eventstore.WrongVersionError
				switch {
				case err == nil:
					won = append(won, e.ID)
				case errors.As(err, &wv) && errors.Is(err, eventstore.ErrWrongVersion):
					lost++
					if wv.Stream != stream || wv.Actual != eventstore.Exact(uint64(round)) {
						t.Errorf("a loser's conflict names stream %q at %s, want %q at %s (the winner's version)",
							wv.Stream, wv.Actual, stream, eventstore.Exact(uint64(round)))
					}
				default:
					unknown = append(unknown, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		check.Len(t, unknown, 0, "round %d: appends failed with other errors", round)
		check.Len(t, won, 1, "round %d: exactly one of %d racing appends wins", round, writers)
		check.Equal(t, lost, writers-1, "round %d: the losers get the conflict error", round)
		winners = append(winners, won[0])
	}
	got := readStream(t, s, stream, eventstore.Forward(0))
	check.Equal(t, recordedIDs(got), winners, "every version written once, by that round's winner")
	check.Equal(t, versionsOf(got), span(0, rounds-1))
}

// testParallelStreamsSubscribed has 16 writers append to 16 streams while a
// subscriber follows the category: it must see every event exactly once,
// in strictly increasing position order, and each stream in its own order.
func testParallelStreamsSubscribed(t testing.TB, s eventstore.Store) {
	n := newNames(t)
	ctx := context.Background()
	const appendsPerWriter = 40

	sub := subscribe(t, s, eventstore.Start, n.filter())
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written = map[uuid.UUID]string{}
		total   int
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := n.stream(string(rune('a' + w)))
			for i := range appendsPerWriter {
				batch := events("x", 1+(w+i)%3)
				if _, err := s.Append(ctx, stream, eventstore.Any, batch...); err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				mu.Lock()
				for _, e := range batch {
					written[e.ID] = stream
				}
				total += len(batch)
				mu.Unlock()
			}
		}()
	}

	seen := map[uuid.UUID]bool{}
	lastVersion := map[string]uint64{}
	var got []eventstore.Event
	expected := 0
	for w := range writers {
		for i := range appendsPerWriter {
			expected += 1 + (w+i)%3
		}
	}
	for len(got) < expected {
		batch := sub.take(t, 1)
		e := batch[0]
		check.True(t, !seen[e.ID], "event %s at %s delivered twice", e.ID, e.Position)
		seen[e.ID] = true
		if v, ok := lastVersion[e.StreamID]; ok {
			check.Equal(t, e.Version, v+1, "stream %q out of order", e.StreamID)
		} else {
			check.Equal(t, e.Version, uint64(0), "stream %q did not start at version 0", e.StreamID)
		}
		lastVersion[e.StreamID] = e.Version
		got = append(got, e)
	}
	wg.Wait()
	requireIncreasing(t, got)
	check.Equal(t, total, expected)
	for id, stream := range written {
		check.True(t, seen[id], "event %s of stream %q was never delivered", id, stream)
	}
	// Nothing beyond what was written arrives: a final marker is next.
	marker := event("marker", "end")
	mustAppend(t, s, n.stream("z"), eventstore.NoStream, marker)
	check.Equal(t, sub.take(t, 1)[0].ID, marker.ID)
}
