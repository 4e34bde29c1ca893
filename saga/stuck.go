package saga

import (
	"sort"
	"sync"
	"time"
)

// ParkedInstance is an instance parked on a message, as [Runner.Parked]
// lists it.
type ParkedInstance struct {
	Instance string
	// Message is the message it failed on: pass its ID to [Runner.Retry]
	// or [Runner.Skip]. Its Error, Attempts and Since say why and how long.
	Message ParkedMessage
	// Held is how many deliveries and rejections wait behind it. Stored
	// events waiting behind it stay in their streams, to be read again
	// when it goes on: [Explanation.Pending] names those sources.
	Held int
}

// stuckIndex is a runner's index of what its instances wait on now: per
// instance, the gaps its latest record leaves open, the message it is
// parked on and how many messages it holds, as the runner saw that record
// (its own steps, the records its outbox reads, and the scan of the
// saga's records when it starts). Instances waiting on nothing are not in
// it, so it is as small as what is stuck.
type stuckIndex struct {
	// anyOrder tells the event types handled out of order (see heldWait).
	anyOrder func(typeName string) bool

	mu sync.Mutex
	of map[string]stuckInstance
	// warned holds the gaps already warned about, so that each is logged
	// once.
	warned map[Gap]bool
	// stepped holds, while a scan of the saga's records runs, the latest
	// version of each instance observed meanwhile: the scan read older
	// records of them, which must not undo what the steps left (an
	// instance forgotten, being stuck on nothing, keeps no version).
	stepped map[string]uint64
}

// stuckInstance is what one instance waits on, after its record version.
type stuckInstance struct {
	version uint64
	gaps    []Gap
	parked  *ParkedMessage
	held    int
}

func newStuckIndex(anyOrder func(typeName string) bool) *stuckIndex {
	return &stuckIndex{anyOrder: anyOrder, of: make(map[string]stuckInstance), warned: make(map[Gap]bool)}
}

// observe records what record version of instance id leaves it waiting
// on, unless a later record of it was observed already.
func (x *stuckIndex) observe(id string, version uint64, rec *record) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, seen := x.of[id]; seen && s.version > version {
		return
	}
	if x.stepped != nil {
		x.stepped[id] = max(x.stepped[id], version)
	}
	s := stuckInstance{version: version, gaps: gapsOf(id, rec, x.anyOrder), held: len(rec.Held)}
	if rec.Parked != nil {
		p := parkedMessageOf(rec.Parked)
		s.parked = &p
	}
	if s.parked == nil && s.held == 0 {
		x.forgetLocked(id)
		return
	}
	x.of[id] = s
}

// beginScan starts keeping the versions observed while a scan runs, and
// endScan stops.
func (x *stuckIndex) beginScan() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stepped = make(map[string]uint64)
}

func (x *stuckIndex) endScan() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stepped = nil
}

// observeScanned is observe for a record a scan read, which a step
// observed since the scan began overrides.
func (x *stuckIndex) observeScanned(id string, version uint64, rec *record) {
	x.mu.Lock()
	v, stepped := x.stepped[id]
	x.mu.Unlock()
	if stepped && v >= version {
		return
	}
	x.observe(id, version, rec)
}

// forget drops the instances for which drop reports true: another process
// runs them now, and this index would not see them change.
func (x *stuckIndex) forget(drop func(id string) bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id := range x.of {
		if drop(id) {
			x.forgetLocked(id)
		}
	}
}

func (x *stuckIndex) forgetLocked(id string) {
	delete(x.of, id)
	for k := range x.warned {
		if k.Instance == id {
			delete(x.warned, k)
		}
	}
}

// knows reports whether the index holds instance id.
func (x *stuckIndex) knows(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.of[id]
	return ok
}

// gaps returns the open gaps, oldest first.
func (x *stuckIndex) gaps() []Gap {
	x.mu.Lock()
	var out []Gap
	for _, s := range x.of {
		out = append(out, s.gaps...)
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Instance < out[j].Instance
	})
	return out
}

// parked returns the parked instances, longest parked first.
func (x *stuckIndex) parked() []ParkedInstance {
	x.mu.Lock()
	var out []ParkedInstance
	for id, s := range x.of {
		if s.parked != nil {
			out = append(out, ParkedInstance{Instance: id, Message: *s.parked, Held: s.held})
		}
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].Message.Since, out[j].Message.Since; !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].Instance < out[j].Instance
	})
	return out
}

// heldCount returns how many messages the instances hold.
func (x *stuckIndex) heldCount() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, s := range x.of {
		n += s.held
	}
	return n
}

// counts returns, in one pass, how many instances are parked, how many
// messages they hold, how many gaps are open and when the oldest opened:
// what the gauges observe, without the sorting of the lists.
func (x *stuckIndex) counts() (parked, held, gaps int, oldest time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.of {
		if s.parked != nil {
			parked++
		}
		held += s.held
		for _, g := range s.gaps {
			if gaps == 0 || g.Since.Before(oldest) {
				oldest = g.Since
			}
			gaps++
		}
	}
	return parked, held, gaps, oldest
}

// overdue returns the gaps open since before cutoff that were not returned
// before.
func (x *stuckIndex) overdue(cutoff time.Time) []Gap {
	var out []Gap
	for _, gap := range x.gaps() {
		if !gap.Since.Before(cutoff) {
			break
		}
		key := gap
		key.Held, key.Since = 0, time.Time{}
		x.mu.Lock()
		fresh := !x.warned[key]
		x.warned[key] = true
		x.mu.Unlock()
		if fresh {
			out = append(out, gap)
		}
	}
	return out
}

// Parked returns the instances of the saga parked on a message now,
// longest parked first, as this runner knows them: from the steps it
// stored, the step records its outbox read, and the saga's records it
// scanned when Run, CatchUp or LoadDeadlines started (so a new process
// lists what an earlier one left parked). A runner of some segments lists
// only theirs. Fix the cause, then [Runner.Retry] or [Runner.Skip] each.
func (r *Runner[S]) Parked() []ParkedInstance { return r.stuck.parked() }
