package keylock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneHolderPerKey: under contention on a few keys, at most one
// goroutine holds a key at a time, every one gets it, and no entry is left
// once all are done, for entries are reused.
func TestOneHolderPerKey(t *testing.T) {
	var l Locks
	const keys, workers, rounds = 3, 16, 300
	var holders [keys]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				key := (w + r) % keys
				held, err := l.Lock(context.Background(), fmt.Sprint("k", key))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				holders[key]++
				assert.Equal(t, 1, holders[key], "key %d held twice", key)
				mu.Unlock()
				time.Sleep(time.Microsecond)
				mu.Lock()
				holders[key]--
				mu.Unlock()
				held.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Zero(t, l.Len())
}

// TestLockGivesUpWithItsContext: a waiter whose context ends gets its
// error and leaves no entry behind; the holder's lock is unaffected.
func TestLockGivesUpWithItsContext(t *testing.T) {
	var l Locks
	held, err := l.Lock(context.Background(), "k")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = l.Lock(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, l.Len())
	held.Unlock()
	assert.Zero(t, l.Len())
	again, err := l.Lock(context.Background(), "k")
	require.NoError(t, err)
	again.Unlock()
}

// TestLockAllocatesNothing: the entries are reused.
func TestLockAllocatesNothing(t *testing.T) {
	var l Locks
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		held, _ := l.Lock(ctx, "k")
		held.Unlock()
	})
	assert.Zero(t, allocs)
}

// TestFreeEntriesAreBounded: released entries are kept for reuse, up to
// maxFree, however many keys were held at once.
func TestFreeEntriesAreBounded(t *testing.T) {
	var l Locks
	ctx := context.Background()
	held := make([]Held, 3*maxFree)
	for i := range held {
		var err error
		held[i], err = l.Lock(ctx, fmt.Sprint("k", i))
		require.NoError(t, err)
	}
	for _, h := range held {
		h.Unlock()
	}
	assert.Zero(t, l.Len())
	assert.Len(t, l.free, maxFree)
	again, err := l.Lock(ctx, "k0")
	require.NoError(t, err)
	assert.Len(t, l.free, maxFree-1, "a new key takes a kept entry")
	again.Unlock()
}

// TestSecondUnlockPanics: unlocking a released lock is caught, whatever
// key its pooled entry serves by then, and the holder of that key keeps it.
func TestSecondUnlockPanics(t *testing.T) {
	var l Locks
	a, err := l.Lock(context.Background(), "a")
	require.NoError(t, err)
	a.Unlock()
	b, err := l.Lock(context.Background(), "b")
	require.NoError(t, err)
	assert.Panics(t, a.Unlock)
	assert.Equal(t, 1, l.Len(), `"b" is still held`)
	b.Unlock()
	assert.Zero(t, l.Len())
}

// BenchmarkLockUnlock is an uncontended lock and its release, as every
// dispatch of a command bus takes one.
func BenchmarkLockUnlock(b *testing.B) {
	var l Locks
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		h, err := l.Lock(ctx, "order-123")
		if err != nil {
			b.Fatal(err)
		}
		h.Unlock()
	}
}
