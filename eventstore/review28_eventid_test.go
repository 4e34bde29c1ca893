package eventstore

// Review 28: NewEventID's hand-made UUIDv7 at the edges of its time field.

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// r28Time is the 60-bit time field of a UUIDv7: 48 bits of ms, then 12.
func r28Time(id uuid.UUID) int64 {
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	return ms<<12 | int64(id[6]&0x0f)<<8 | int64(id[7])
}

// When the clock stands still or steps back, the time field counts on
// from the last ID's, carrying its 12 bits into the milliseconds: the IDs
// stay valid UUIDv7s, strictly increasing, never repeating.
func TestReview28TimeFieldCarriesIntoMilliseconds(t *testing.T) {
	// The last ID was made a second in the future (a clock that stepped
	// back), at the last 4096th of its millisecond but three.
	restoreV7Time(t)
	future := (time.Now().UnixMilli()+1000)<<12 | 0xffc
	lastV7Time.Store(future)
	prev := uuid.UUID{}
	for i := range 10 {
		id := NewEventID()
		if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: version %d variant %v", id, id.Version(), id.Variant())
		}
		if got, want := r28Time(id), future+1+int64(i); got != want {
			t.Fatalf("ID %d: time field %x, want %x", i, got, want)
		}
		if i > 0 && bytes.Compare(prev[:], id[:]) >= 0 {
			t.Fatalf("%s after %s", id, prev)
		}
		prev = id
	}
}

// Across goroutines every ID is unique, valid, and each goroutine's are
// strictly increasing; so is the time field of all of them, taken together.
func TestReview28IDsAcrossGoroutines(t *testing.T) {
	const goroutines, per = 8, 20000
	ids := make([][]uuid.UUID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				ids[g] = append(ids[g], NewEventID())
			}
		}()
	}
	wg.Wait()
	times := map[int64]bool{}
	for g := range ids {
		for i, id := range ids[g] {
			if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
				t.Fatalf("%s: version %d variant %v", id, id.Version(), id.Variant())
			}
			if i > 0 && bytes.Compare(ids[g][i-1][:], id[:]) >= 0 {
				t.Fatalf("goroutine %d: %s after %s", g, id, ids[g][i-1])
			}
			tf := r28Time(id)
			if times[tf] {
				t.Fatalf("time field %x given twice", tf)
			}
			times[tf] = true
		}
	}
	// The IDs are no further ahead of the clock than they had to be.
	if last := lastV7Time.Load() >> 12; last > time.Now().UnixMilli()+1000+goroutines*per/4096+2 {
		t.Fatalf("time field ran %d ms ahead of the clock", last-time.Now().UnixMilli())
	}
}
