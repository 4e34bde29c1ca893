package saga

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/failpoint"
)

// timers is a runner's index of pending deadlines: per instance, the
// deadlines its latest record holds, and one heap per segment ordered by
// when they are due. It costs one heap entry per pending deadline, and no
// timer or goroutine each: the runner waits for the earliest only.
//
// Only the deadlines of active segments (those this runner runs) are
// indexed and fired: a segment run elsewhere is another process's to
// fire, and its index would go stale here. When a segment becomes active
// again, the runner reloads its deadlines from the store.
type timers struct {
	mu       sync.Mutex
	pending  map[string][]due  // instance -> its pending deadlines (few: a slice beats a map)
	version  map[string]uint64 // instance -> version of the record the entry came from
	segments int
	heaps    []dueHeap // by segment
	active   []bool    // by segment
	// complete, by segment, is the position up to which this index holds
	// every deadline of the segment's records, while the segment has
	// stayed active (nil: unknown).
	complete []*eventstore.Position
	changed  chan struct{} // closed and replaced when an earlier deadline arrives, or a segment becomes active
}

// due is one pending deadline of an instance.
type due struct {
	id string
	at time.Time
}

// find returns when deadline id of instance is due, and whether it is
// pending.
func (t *timers) find(instance, id string) (time.Time, bool) {
	for _, d := range t.pending[instance] {
		if d.id == id {
			return d.at, true
		}
	}
	return time.Time{}, false
}

// newTimers returns the index of an unsegmented runner.
func newTimers() *timers { return newSegmentTimers(1) }

// newSegmentTimers returns an index over n segments, all active.
func newSegmentTimers(n int) *timers {
	t := &timers{pending: make(map[string][]due), version: make(map[string]uint64), segments: n,
		heaps: make([]dueHeap, n), active: make([]bool, n), complete: make([]*eventstore.Position, n), changed: make(chan struct{})}
	for k := range t.active {
		t.active[k] = true
	}
	return t
}

// observe records the deadlines pending after record version of instance
// id, unless a later record of it was observed already, or its segment is
// not active.
func (t *timers) observe(id string, version uint64, deadlines []deadline) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := Segment(id, t.segments)
	if !t.active[k] {
		return
	}
	if v, seen := t.version[id]; seen && v > version {
		return
	}
	if len(deadlines) == 0 {
		delete(t.pending, id)
		delete(t.version, id)
		return
	}
	t.version[id] = version
	set := make([]due, 0, len(deadlines))
	earliest, _ := t.earliest()
	wake := false
	for _, d := range deadlines {
		set = append(set, due{id: d.ID, at: d.At})
		if old, had := t.find(id, d.ID); had && old.Equal(d.At) {
			continue // already in the heap
		}
		heap.Push(&t.heaps[k], dueEntry{at: d.At, instance: id, id: d.ID})
		wake = wake || earliest.IsZero() || d.At.Before(earliest)
	}
	t.pending[id] = set
	if wake {
		t.wake()
	}
}

// wake tells the runner's waiting loop to look at the index again.
func (t *timers) wake() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// isActive reports whether segment k's deadlines are indexed here.
func (t *timers) isActive(k int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[k]
}

// setActive makes segment k's deadlines indexed and fired here, or not.
// A segment that stops being active forgets its deadlines: another
// process fires them, and this index would not see them change.
func (t *timers) setActive(k int, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[k] == on {
		return
	}
	t.active[k] = on
	if !on {
		for id := range t.version {
			if Segment(id, t.segments) == k {
				delete(t.version, id)
				delete(t.pending, id)
			}
		}
		t.heaps[k] = nil
		t.complete[k] = nil
	}
	t.wake()
}

// covered reports whether the index holds every deadline of segment k's
// records up to position from: this process has run the segment's outbox
// without a break since it last read them all, and read it that far.
func (t *timers) covered(k int, from eventstore.Position) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[k] && t.complete[k] != nil && !t.complete[k].Before(from)
}

// cover records that the index holds every deadline of segment k's
// records up to position p, unless the segment is not active (its
// consumer is stopping).
func (t *timers) cover(k int, p eventstore.Position) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[k] && (t.complete[k] == nil || t.complete[k].Before(p)) {
		t.complete[k] = &p
	}
}

// earliest returns when the first live deadline of an active segment is
// due (zero for none) and that segment, dropping heap entries that are no
// longer pending on the way.
func (t *timers) earliest() (time.Time, int) {
	var first time.Time
	seg := -1
	for k := range t.heaps {
		if !t.active[k] {
			continue
		}
		h := &t.heaps[k]
		for h.Len() > 0 {
			top := (*h)[0]
			if at, ok := t.find(top.instance, top.id); ok && at.Equal(top.at) {
				if first.IsZero() || top.at.Before(first) {
					first, seg = top.at, k
				}
				break
			}
			heap.Pop(h)
		}
	}
	return first, seg
}

// next returns the earliest due time (zero for none) and a channel closed
// when an earlier deadline arrives.
func (t *timers) next() (time.Time, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, _ := t.earliest()
	return at, t.changed
}

// popDue removes and returns the deadlines due at now.
func (t *timers) popDue(now time.Time) []dueEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []dueEntry
	for {
		at, k := t.earliest()
		if at.IsZero() || at.After(now) {
			return out
		}
		e := heap.Pop(&t.heaps[k]).(dueEntry)
		rest := slices.DeleteFunc(t.pending[e.instance], func(d due) bool { return d.id == e.id })
		if len(rest) == 0 {
			delete(t.pending, e.instance)
		} else {
			t.pending[e.instance] = rest
		}
		out = append(out, e)
	}
}

// again puts back a deadline whose firing failed, unless a later record
// changed the instance's deadlines meanwhile.
func (t *timers) again(e dueEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, live := t.version[e.instance]; !live {
		return // a later record, or the segment's move elsewhere, dropped it
	}
	t.pending[e.instance] = append(t.pending[e.instance], due{id: e.id, at: e.at})
	heap.Push(&t.heaps[Segment(e.instance, t.segments)], e)
}

// count returns the number of pending deadlines and when the next is due.
func (t *timers) count() (n int, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, set := range t.pending {
		n += len(set)
	}
	next, _ = t.earliest()
	return n, next
}

type dueEntry struct {
	at       time.Time
	instance string
	id       string
}

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// FireDue fires every deadline due at the runner's clock's now, each as a
// step of its instance, and returns how many fired (a deadline cancelled
// or rescheduled in the meantime does not fire, and is not counted). Run
// calls it when the earliest deadline is due; tests that move a fake clock
// call it themselves.
func (r *Runner[S]) FireDue(ctx context.Context) (int, error) {
	fired := 0
	due := r.timers.popDue(r.e.now())
	for i, d := range due {
		out, err := r.e.process(ctx, d.instance, &message{kind: kindDeadline, deadline: d.id})
		hit(failpoint.DeadlineAfterFire)
		if err != nil {
			for _, d := range due[i:] {
				r.timers.again(d) // they fire at the next call: this one, and those not tried yet
			}
			return fired, err
		}
		if out == handled || out == parkedOut {
			fired++
		}
	}
	return fired, nil
}
