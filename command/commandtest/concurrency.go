package commandtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/internal/busprobe"
	"github.com/cairn-es/cairn/internal/check"
	"github.com/cairn-es/cairn/retry"
)

func concurrencyTests(o Options) []test {
	w, n := o.HotWorkers, o.HotIncrements
	return []test{
		// Without a cache nor snapshots every dispatch replays the stream,
		// so that variant is smaller: 3,200 commands would replay 5M events.
		{"HotCounterReplayOnly", func(t testing.TB, e *env) { testHotCounter(t, e, min(w, 8), min(n, 25), true, 0) }},
		{"HotCounterSnapshots", func(t testing.TB, e *env) { testHotCounter(t, e, w, n, true, 64) }},
		{"HotCounterCache", func(t testing.TB, e *env) { testHotCounter(t, e, w, n, false, 0) }},
		{"HotCounterCacheAndSnapshots", func(t testing.TB, e *env) { testHotCounter(t, e, w, n, false, 50) }},
		{"ManyAggregatesSmallCache", testManyAggregatesSmallCache},
	}
}

// testHotCounter runs (at full size) 32 goroutines x 100 increments of one counter through
// two buses on one store, as two processes would: each bus serializes its
// own commands, so the two really conflict, and each retries from its cache
// (evicted on conflict) or from the store. Whatever conflicts a bus gives up
// on are redelivered with the same command ID, as a queue would.
func testHotCounter(t testing.TB, e *env, hotWorkers, hotIncrements int, noCache bool, snapshotEvery uint64) {
	opts := command.Options{NoCache: noCache, Retry: retry.Policy{Initial: 100 * time.Microsecond, Max: 2 * time.Millisecond}}
	buses := []*command.Bus{e.bus(opts, snapshotEvery), e.bus(opts, snapshotEvery)}
	id := e.id("hot")
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	attempts := 0
	for w := range hotWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := buses[w%len(buses)]
			for i := range hotIncrements {
				msg := command.Message{ID: fmt.Sprintf("%sw%d-i%d", e.prefix, w, i), Command: Increment{ID: id}}
				res, _, err := dispatchUntilDone(ctx, b, msg)
				if err != nil {
					t.Errorf("dispatch %s: %v", msg.ID, err)
					return
				}
				if len(res.Events) != 1 {
					t.Errorf("dispatch %s: %d events, want 1: %+v", msg.ID, len(res.Events), res.Events)
				}
				mu.Lock()
				attempts += res.Attempts
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := hotWorkers * hotIncrements
	check.Equal(t, e.load(id).Count, total, "final count")
	evs := e.events(id)
	check.Len(t, evs, total, "events in the stream")
	seen := make(map[string]int, total)
	for _, ev := range evs {
		seen[ev.Metadata.CommandID]++
	}
	check.Len(t, seen, total, "every command ID must be recorded")
	for cmd, n := range seen {
		if n != 1 {
			t.Errorf("command %s produced %d events, want 1", cmd, n)
		}
	}
	t.Logf("%d commands decided %d times (conflicts between the two buses)", total, attempts)
}

// testManyAggregatesSmallCache spreads commands over more aggregates than
// the cache holds, so that instances are evicted by size while others use
// them.
func testManyAggregatesSmallCache(t testing.TB, e *env) {
	b := e.bus(command.Options{CacheSize: 4}, 0)
	const aggregates, workers, each = 16, 8, 40
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := e.id(fmt.Sprint("agg", (w*7+i)%aggregates))
				msg := command.Message{ID: fmt.Sprintf("%sw%d-%d", e.prefix, w, i), Command: Increment{ID: id}}
				if _, _, err := dispatchUntilDone(ctx, b, msg); err != nil {
					t.Errorf("dispatch %s: %v", msg.ID, err)
				}
			}
		}()
	}
	wg.Wait()
	check.AtMost(t, busprobe.CachedAggregates(b), 4)
	sum := 0
	for a := range aggregates {
		sum += e.load(e.id(fmt.Sprint("agg", a))).Count
	}
	check.Equal(t, sum, workers*each)
}
