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
// bounded by the work in flight, not by the keys ever seen; the entries
// themselves are reused, so that taking a lock allocates nothing.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
	free  sync.Pool // of *lock, unlocked and unreferenced
}

type lock struct {
	ch   chan struct{} // holds a token while locked
	refs int
}

// Held is a lock taken by [Locks.Lock]. Unlock it once.
type Held struct {
	l   *Locks
	key string
	k   *lock
}

// Unlock releases the lock.
func (h Held) Unlock() {
	<-h.k.ch
	h.l.release(h.key, h.k)
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
		k, _ = l.free.Get().(*lock)
		if k == nil {
			k = &lock{ch: make(chan struct{}, 1)}
		}
		l.locks[key] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case k.ch <- struct{}{}:
		return Held{l: l, key: key, k: k}, nil
	case <-ctx.Done():
		l.release(key, k)
		return Held{}, ctx.Err()
	}
}

func (l *Locks) release(key string, k *lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.refs--; k.refs == 0 {
		delete(l.locks, key)
		l.free.Put(k)
	}
}

// Len returns how many keys are locked or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
