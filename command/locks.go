package command

import (
	"context"
	"sync"
)

// streamLocks serializes the dispatches to one stream within a bus, so that
// a cached instance has one user at a time and local commands do not
// conflict with each other. Entries live only while someone holds or waits
// for them.
type streamLocks struct {
	mu    sync.Mutex
	locks map[string]*streamLock
}

type streamLock struct {
	ch   chan struct{} // holds a token while locked
	refs int
}

// lock takes the lock of stream, or fails when ctx ends first. The returned
// function releases it.
func (l *streamLocks) lock(ctx context.Context, stream string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*streamLock)
	}
	sl := l.locks[stream]
	if sl == nil {
		sl = &streamLock{ch: make(chan struct{}, 1)}
		l.locks[stream] = sl
	}
	sl.refs++
	l.mu.Unlock()

	select {
	case sl.ch <- struct{}{}:
		return func() {
			<-sl.ch
			l.release(stream, sl)
		}, nil
	case <-ctx.Done():
		l.release(stream, sl)
		return nil, ctx.Err()
	}
}

func (l *streamLocks) release(stream string, sl *streamLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sl.refs--; sl.refs == 0 {
		delete(l.locks, stream)
	}
}
