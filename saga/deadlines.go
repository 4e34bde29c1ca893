package saga

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// timers is a runner's index of pending deadlines: per instance, the
// deadlines its latest record holds, and one heap ordered by when they are
// due. It costs one heap entry per pending deadline, and no timer or
// goroutine each: the runner waits for the earliest only.
type timers struct {
	mu      sync.Mutex
	pending map[string][]due  // instance -> its pending deadlines (few: a slice beats a map)
	version map[string]uint64 // instance -> version of the record the entry came from
	heap    dueHeap
	changed chan struct{} // closed and replaced when an earlier deadline arrives
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

func newTimers() *timers {
	return &timers{pending: make(map[string][]due), version: make(map[string]uint64), changed: make(chan struct{})}
}

// observe records the deadlines pending after record version of instance
// id, unless a later record of it was observed already.
func (t *timers) observe(id string, version uint64, deadlines []deadline) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
	earliest := t.earliest()
	wake := false
	for _, d := range deadlines {
		set = append(set, due{id: d.ID, at: d.At})
		if old, had := t.find(id, d.ID); had && old.Equal(d.At) {
			continue // already in the heap
		}
		heap.Push(&t.heap, dueEntry{at: d.At, instance: id, id: d.ID})
		wake = wake || earliest.IsZero() || d.At.Before(earliest)
	}
	t.pending[id] = set
	if wake {
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// earliest returns when the first live deadline is due, zero for none,
// dropping heap entries that are no longer pending on the way.
func (t *timers) earliest() time.Time {
	for t.heap.Len() > 0 {
		top := t.heap[0]
		if at, ok := t.find(top.instance, top.id); ok && at.Equal(top.at) {
			return top.at
		}
		heap.Pop(&t.heap)
	}
	return time.Time{}
}

// next returns the earliest due time (zero for none) and a channel closed
// when an earlier deadline arrives.
func (t *timers) next() (time.Time, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.earliest(), t.changed
}

// popDue removes and returns the deadlines due at now.
func (t *timers) popDue(now time.Time) []dueEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []dueEntry
	for {
		at := t.earliest()
		if at.IsZero() || at.After(now) {
			return out
		}
		e := heap.Pop(&t.heap).(dueEntry)
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
		return
	}
	t.pending[e.instance] = append(t.pending[e.instance], due{id: e.id, at: e.at})
	heap.Push(&t.heap, e)
}

// count returns the number of pending deadlines and when the next is due.
func (t *timers) count() (n int, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, set := range t.pending {
		n += len(set)
	}
	return n, t.earliest()
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
	for _, d := range r.timers.popDue(r.e.now()) {
		out, err := r.e.process(ctx, d.instance, &message{kind: kindDeadline, deadline: d.id})
		if err != nil {
			r.timers.again(d) // it fires at the next call
			return fired, err
		}
		if out == handled || out == parkedOut {
			fired++
		}
	}
	return fired, nil
}
