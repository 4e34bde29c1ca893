package keylock

import (
	"context"
	"testing"
	"time"
)

// TestReview28SecondUnlockLeavesOtherKeysAlone: Held documents "Unlock it
// once", but a second Unlock (a defer plus an explicit Unlock on some
// path) used to block on the dead entry. With pooled entries, the entry
// may by then be another key's, held by another goroutine: the stale
// Unlock takes that holder's token, and a third goroutine gets the key
// while it is still held (two holders of one aggregate in one bus).
func TestReview28SecondUnlockLeavesOtherKeysAlone(t *testing.T) {
	ctx := context.Background()
	for range 20 {
		var l Locks
		a, err := l.Lock(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		a.Unlock()
		b, err := l.Lock(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if b.k != a.k {
			b.Unlock()
			continue // the pool did not hand the entry back this time
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = recover() }() // the misuse panics, now
			a.Unlock()
		}()
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond):
			b.Unlock()
			return // blocked, as before pooling: no harm to "b"
		}
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = l.Lock(tctx, "b")
		cancel()
		if err == nil {
			t.Fatal(`a second Unlock of "a" released "b", which another holder still holds`)
		}
		return
	}
	t.Skip("the pool never reused an entry")
}
