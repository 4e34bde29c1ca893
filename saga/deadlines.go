package saga

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// timers is a runner's index of pending deadlines: per instance, the
// deadlines its latest record holds, and one heap per segment ordered by
// when they are due. Each pending deadline is one heap entry, moved in
// place when it is rescheduled and removed when it is cancelled, so memory
// follows the deadlines pending, not how often they changed; no timer or
// goroutine each: the runner waits for the earliest only.
//
// Only the deadlines of active segments (those this runner runs) are
// indexed and fired: a segment run elsewhere is another process's to
// fire, and its index would go stale here. When a segment becomes active
// again, the runner reloads its deadlines from the store.
type timers struct {
	mu        sync.Mutex
	instances map[string]*instanceTimers
	segments  int
	heaps     []dueHeap // by segment
	active    []bool    // by segment
	// complete, by segment, is the position up to which this index holds
	// every deadline of the segment's records, while the segment has
	// stayed active (nil: unknown); epochs count the segment's changes of
	// activity, so that a scan covers only segments that stayed active
	// while it ran.
	complete []*eventstore.Position
	epochs   []uint64
	changed  chan struct{} // closed and replaced when an earlier deadline arrives, or a segment becomes active
}

// instanceTimers are the pending deadlines of one instance, as the record
// at version left them.
type instanceTimers struct {
	version uint64
	pending []*dueEntry // few: a slice beats a map
}

// dueEntry is one pending deadline in its segment's heap.
type dueEntry struct {
	at       time.Time
	instance string
	id       string
	// name is the deadline's name, and trace the traceparent of the step
	// that scheduled it ("" when unknown): what its firing's span says.
	name, trace string
	// version is the record the deadline was indexed from.
	version uint64
	// index is the entry's place in its heap, kept by the heap's methods.
	index int
}

// newTimers returns the index of an unsegmented runner.
func newTimers() *timers { return newSegmentTimers(1) }

// newSegmentTimers returns an index over n segments, all active.
func newSegmentTimers(n int) *timers {
	t := &timers{instances: make(map[string]*instanceTimers), segments: n,
		heaps: make([]dueHeap, n), active: make([]bool, n), complete: make([]*eventstore.Position, n), epochs: make([]uint64, n),
		changed: make(chan struct{})}
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
	it := t.instances[id]
	if it != nil && it.version > version {
		return
	}
	h := &t.heaps[k]
	var kept []*dueEntry
	earliest, _, _ := t.earliest()
	wake := false
	for _, d := range deadlines {
		var e *dueEntry
		if it != nil {
			if i := slices.IndexFunc(it.pending, func(e *dueEntry) bool { return e.id == d.ID }); i >= 0 {
				e = it.pending[i]
				it.pending = slices.Delete(it.pending, i, i+1)
			}
		}
		switch {
		case e == nil:
			e = &dueEntry{at: d.At, instance: id, id: d.ID, name: d.Name, trace: d.Trace, version: version}
			heap.Push(h, e)
		case !e.at.Equal(d.At):
			e.at = d.At
			heap.Fix(h, e.index)
		}
		e.version = version
		kept = append(kept, e)
		wake = wake || earliest.IsZero() || d.At.Before(earliest)
	}
	if it != nil {
		for _, gone := range it.pending {
			heap.Remove(h, gone.index) // cancelled, fired, or rescheduled under another ID
		}
	}
	if len(kept) == 0 {
		delete(t.instances, id)
	} else {
		t.instances[id] = &instanceTimers{version: version, pending: kept}
	}
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
	t.epochs[k]++
	if !on {
		for id := range t.instances {
			if Segment(id, t.segments) == k {
				delete(t.instances, id)
			}
		}
		t.heaps[k] = nil
		t.complete[k] = nil
	}
	t.wake()
}

// covered reports whether the index holds every deadline of segment k's
// records up to position from: this process has read them all, and kept
// reading since.
func (t *timers) covered(k int, from eventstore.Position) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[k] && t.complete[k] != nil && !t.complete[k].Before(from)
}

// whole reports whether the index of every active segment is known to be
// whole up to some position (see cover); true when none is active.
func (t *timers) whole() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, on := range t.active {
		if on && t.complete[k] == nil {
			return false
		}
	}
	return true
}

// plan returns where a scan of the saga's records must start for the
// index of every active segment to be complete after it (the lowest
// position one is complete to; the start of the log when one is not known
// to be complete), and the active segments with their epochs, for cover.
func (t *timers) plan() (start eventstore.Position, epochs map[int]uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	epochs = make(map[int]uint64)
	first := true
	for k, on := range t.active {
		if !on {
			continue
		}
		epochs[k] = t.epochs[k]
		switch {
		case t.complete[k] == nil:
			start, first = eventstore.Start, false
		case first || t.complete[k].Before(start):
			start, first = *t.complete[k], false
		}
	}
	return start, epochs
}

// cover records that the index holds every deadline of segment k's
// records up to position p, unless the segment's activity changed since
// epoch (see plan).
func (t *timers) cover(k int, p eventstore.Position, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active[k] || t.epochs[k] != epoch {
		return
	}
	if t.complete[k] == nil || t.complete[k].Before(p) {
		t.complete[k] = &p
	}
}

// extend records that the outbox of segment k, whose index was complete
// where its session started, has read on up to position p.
func (t *timers) extend(k int, p eventstore.Position) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[k] && t.complete[k] != nil && t.complete[k].Before(p) {
		t.complete[k] = &p
	}
}

// knows reports whether the index holds deadlines of instance id.
func (t *timers) knows(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.instances[id] != nil
}

// earliest returns when the first deadline of an active segment is due
// and that segment; ok is false when none is pending.
func (t *timers) earliest() (first time.Time, seg int, ok bool) {
	seg = -1
	for k := range t.heaps {
		if !t.active[k] || len(t.heaps[k]) == 0 {
			continue
		}
		top := t.heaps[k][0]
		if !ok || top.at.Before(first) {
			first, seg, ok = top.at, k, true
		}
	}
	return first, seg, ok
}

// next returns the earliest due time (ok false for none) and a channel
// closed when an earlier deadline arrives.
func (t *timers) next() (at time.Time, ok bool, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, _, ok = t.earliest()
	return at, ok, t.changed
}

// popDue removes and returns the deadlines due at now.
func (t *timers) popDue(now time.Time) []dueEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []dueEntry
	for {
		at, k, ok := t.earliest()
		if !ok || at.After(now) {
			return out
		}
		e := heap.Pop(&t.heaps[k]).(*dueEntry)
		if it := t.instances[e.instance]; it != nil {
			it.pending = slices.DeleteFunc(it.pending, func(p *dueEntry) bool { return p == e })
			if len(it.pending) == 0 {
				delete(t.instances, e.instance)
			}
		}
		out = append(out, *e)
	}
}

// again puts back a deadline whose firing failed, unless a later record
// of its instance was observed meanwhile, or its segment moved elsewhere.
func (t *timers) again(e dueEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := Segment(e.instance, t.segments)
	it := t.instances[e.instance]
	if !t.active[k] || (it != nil && it.version > e.version) {
		return
	}
	if it == nil {
		it = &instanceTimers{version: e.version}
		t.instances[e.instance] = it
	}
	if slices.ContainsFunc(it.pending, func(p *dueEntry) bool { return p.id == e.id }) {
		return
	}
	entry := &dueEntry{at: e.at, instance: e.instance, id: e.id, name: e.name, trace: e.trace, version: e.version}
	it.pending = append(it.pending, entry)
	heap.Push(&t.heaps[k], entry)
}

// count returns the number of pending deadlines and when the next is due.
func (t *timers) count() (n int, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.heaps {
		if t.active[k] {
			n += len(h)
		}
	}
	next, _, _ = t.earliest()
	return n, next
}

// due returns the number of pending deadlines, and of those due at now
// (overdue: a deadline is fired as soon as it is due, so one that stays
// due is late). Counting the due ones visits only them and the heap
// entries just below them.
func (t *timers) due(now time.Time) (pending, overdue int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.heaps {
		if !t.active[k] {
			continue
		}
		pending += len(h)
		overdue += h.dueAt(0, now)
	}
	return pending, overdue
}

// dueAt counts the entries due at now in the subtree of the heap rooted
// at i: a child is never due before its parent.
func (h dueHeap) dueAt(i int, now time.Time) int {
	n := 0
	stack := []int{i}
	for len(stack) > 0 {
		i, stack = stack[len(stack)-1], stack[:len(stack)-1]
		if i >= len(h) || h[i].at.After(now) {
			continue
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

// dueHeap is a heap of pending deadlines, soonest first, whose entries
// know their place in it.
type dueHeap []*dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*dueEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
