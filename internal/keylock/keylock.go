// Package keylock serializes work by key within a process: the dispatches
// to one aggregate's stream in the command bus, the steps of one saga
// instance in a saga runner.
package keylock

import (
	"context"
	"sync"
)

// Locks is a set of locks, one per key. Its zero value is ready to use.
// Entries live only while someone holds or waits for them, so memory stays
// bounded by the work in flight, not by the keys ever seen; up to maxFree
// released entries are kept for reuse, so that taking a lock allocates
// nothing.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
	// free holds released entries, unlocked and unreferenced: a slice
	// under mu, which Lock and release hold anyway, is a few instructions
	// where a sync.Pool's Get and Put, on every dispatch of a command bus,
	// were the largest part of its lock's cost between two round trips to
	// a store (code that is out of the caches by then).
	free []*lock
}

// maxFree bounds the released entries a Locks keeps.
const maxFree = 64

type lock struct {
	ch   chan struct{} // holds a token while locked
	refs int
	// gen counts the unlocks of the entry, whatever key it serves: a Held
	// records it when it takes the lock, so that an Unlock of a lock
	// already released is caught rather than release another holder's.
	gen uint64
}

// Held is a lock taken by [Locks.Lock]. Unlock it once.
type Held struct {
	l   *Locks
	key string
	k   *lock
	gen uint64
}

// Unlock releases the lock. Unlocking a lock that was released already
// is a bug of the caller's, and panics: the entry may serve another holder
// by then, pooled entries being reused.
func (h Held) Unlock() {
	l := h.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.k.gen != h.gen {
		panic("keylock: Unlock of a lock released before")
	}
	h.k.gen++
	<-h.k.ch // the token this holder put there: never blocks
	l.releaseLocked(h.key, h.k)
}

// Lock takes the lock of key, or fails with ctx's error when ctx ends
// first.
func (l *Locks) Lock(ctx context.Context, key string) (Held, error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*lock)
	}
	k := l.locks[key]
	if k == nil {
		if n := len(l.free); n > 0 {
			k = l.free[n-1]
			l.free[n-1] = nil
			l.free = l.free[:n-1]
		} else {
			k = &lock{ch: make(chan struct{}, 1)}
		}
		l.locks[key] = k
	}
	k.refs++
	l.mu.Unlock()

	// A free lock is taken at once, without a select over ctx's channel
	// (the previous holder's Unlock moved gen before it took its token
	// back: see below).
	select {
	case k.ch <- struct{}{}:
		return Held{l: l, key: key, k: k, gen: k.gen}, nil
	default:
	}
	select {
	case k.ch <- struct{}{}:
		// The previous holder's Unlock moved gen before it took its token
		// back, which happens before this send completes: reading it
		// needs no lock.
		return Held{l: l, key: key, k: k, gen: k.gen}, nil
	case <-ctx.Done():
		l.release(key, k)
		return Held{}, ctx.Err()
	}
}

func (l *Locks) release(key string, k *lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(key, k)
}

// releaseLocked drops one reference to k, with l.mu held.
func (l *Locks) releaseLocked(key string, k *lock) {
	if k.refs--; k.refs == 0 {
		delete(l.locks, key)
		if len(l.free) < maxFree {
			l.free = append(l.free, k)
		}
	}
}

// Len returns how many keys are locked or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
