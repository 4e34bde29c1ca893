package eventstore

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// NewEventID makes UUIDv7s: version 7, the RFC 9562 variant, and the
// time they were made in their first 48 bits.
func TestNewEventIDIsAUUIDv7OfNow(t *testing.T) {
	// As in a process that has made no ID yet: tests that make many run
	// the time field ahead of the clock (4,096 IDs a millisecond).
	restoreV7Time(t)
	lastV7Time.Store(0)
	before := time.Now().UnixMilli()
	id := NewEventID()
	after := time.Now().UnixMilli()
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("%s: version %d, variant %s; want 7, RFC4122", id, id.Version(), id.Variant())
	}
	parsed, err := uuid.Parse(id.String())
	if err != nil || parsed != id {
		t.Fatalf("%s does not parse back: %v", id, err)
	}
	// One more millisecond than the clock's: an ID made while the
	// fraction of a millisecond was at its end may carry into the next.
	ms := millis(id)
	if ms < before || ms > after+1 {
		t.Fatalf("%s holds millisecond %d, made between %d and %d", id, ms, before, after)
	}
}

func millis(id uuid.UUID) int64 {
	var ms int64
	for _, b := range id[:6] {
		ms = ms<<8 | int64(b)
	}
	return ms
}

// The IDs of one process are unique and strictly increasing in the order
// they were made, also many within one millisecond (more than the 4,096
// the 12 bits of its fraction tell apart), and from goroutines racing.
func TestNewEventIDsAreUniqueAndIncreasing(t *testing.T) {
	const goroutines, each = 8, 20_000
	ids := make([][]uuid.UUID, goroutines)
	var wg sync.WaitGroup
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[g] = make([]uuid.UUID, each)
			for i := range ids[g] {
				ids[g][i] = NewEventID()
			}
		}()
	}
	wg.Wait()
	seen := make(map[uuid.UUID]bool, goroutines*each)
	for g := range ids {
		for i, id := range ids[g] {
			if seen[id] {
				t.Fatalf("%s made twice", id)
			}
			seen[id] = true
			if i > 0 && bytes.Compare(ids[g][i-1][:], id[:]) >= 0 {
				t.Fatalf("goroutine %d made %s after %s", g, id, ids[g][i-1])
			}
			if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
				t.Fatalf("%s: version %d, variant %s", id, id.Version(), id.Variant())
			}
		}
	}
	// An ID made after the others sorts after all of them.
	last := NewEventID()
	for g := range ids {
		if bytes.Compare(ids[g][each-1][:], last[:]) >= 0 {
			t.Fatalf("%s made after %s sorts before it", last, ids[g][each-1])
		}
	}
}

// The last 62 bits are random, so that two processes that make IDs in the
// same fraction of a millisecond do not make the same one: no two of many
// IDs share them.
func TestNewEventIDRandomBitsDiffer(t *testing.T) {
	seen := make(map[[8]byte]bool)
	for range 10_000 {
		id := NewEventID()
		var tail [8]byte
		copy(tail[:], id[8:])
		tail[0] &= 0x3f
		if seen[tail] {
			t.Fatalf("random bits %x repeated", tail)
		}
		seen[tail] = true
	}
}

func BenchmarkNewEventID(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = NewEventID()
	}
}

// NewEventIDAt makes its IDs at the caller's clock reading: one taken now
// gives that millisecond; one from the past (a reading taken before another
// caller's ID was made) still gives an ID after every earlier one.
func TestNewEventIDAtTakesTheCallersTime(t *testing.T) {
	restoreV7Time(t)
	now := time.Now().Add(time.Hour) // later than any ID made so far
	id := NewEventIDAt(now)
	if got := millis(id); got != now.UnixMilli() {
		t.Fatalf("%s holds millisecond %d, want %d", id, got, now.UnixMilli())
	}
	past := NewEventIDAt(now.Add(-2 * time.Hour))
	if bytes.Compare(id[:], past[:]) >= 0 {
		t.Fatalf("%s, made after %s at an earlier reading, sorts before it", past, id)
	}
	if past.Version() != 7 || past.Variant() != uuid.RFC4122 {
		t.Fatalf("%s: version %d, variant %s", past, past.Version(), past.Variant())
	}
}

// restoreV7Time puts the time field of the last ID back when t ends: a test
// that makes IDs in the future must not leave the clock there for those
// that check IDs of now.
func restoreV7Time(t *testing.T) {
	saved := lastV7Time.Load()
	t.Cleanup(func() { lastV7Time.Store(saved) })
}
