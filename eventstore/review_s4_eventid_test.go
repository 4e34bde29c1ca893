package eventstore_test

// Review s4: NewEventID's pooled ChaCha8 random bits and NewEventIDAt, from
// the public API.

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
)

// Many goroutines make IDs at once, some with NewEventID, some with
// NewEventIDAt at readings taken earlier (as a store that reads its clock
// before a lock does), some in the past: every ID is a UUIDv7 of the RFC
// 9562 variant, each goroutine's IDs strictly increase, no two IDs are
// equal, and no two share their 62 random bits (two pooled generators
// seeded alike would repeat each other's stream).
func TestReviewS4IDsFromManyGoroutines(t *testing.T) {
	const goroutines, each = 8, 20000
	ids := make([][]uuid.UUID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uuid.UUID, 0, each)
			reading := time.Now()
			for i := range each {
				switch i % 4 {
				case 0:
					out = append(out, eventstore.NewEventID())
				case 1:
					out = append(out, eventstore.NewEventIDAt(reading)) // a stale reading
				case 2:
					out = append(out, eventstore.NewEventIDAt(time.Now().Add(-time.Hour)))
				default:
					reading = time.Now()
					out = append(out, eventstore.NewEventIDAt(reading))
				}
			}
			ids[g] = out
		}()
	}
	wg.Wait()

	seen := make(map[uuid.UUID]bool, goroutines*each)
	random := make(map[uint64]bool, goroutines*each)
	for g, out := range ids {
		for i, id := range out {
			require.Equal(t, uuid.Version(7), id.Version(), "%s", id)
			require.Equal(t, uuid.RFC4122, id.Variant(), "%s", id)
			require.Equal(t, byte(0x80), id[8]&0xc0, "%s: variant bits", id)
			require.False(t, seen[id], "%s made twice", id)
			seen[id] = true
			bits := binary.BigEndian.Uint64(id[8:]) & (1<<62 - 1)
			require.False(t, random[bits], "%s repeats another ID's random bits", id)
			random[bits] = true
			if i > 0 {
				require.Negative(t, bytes.Compare(out[i-1][:], id[:]), "goroutine %d: ID %d (%s) does not sort after %s", g, i, id, out[i-1])
			}
		}
	}
}

// An ID made at a reading ahead of every other one holds that reading's
// millisecond, and the IDs made after it, at the clock or in the past,
// sort after it; an ID at the zero time is still a UUIDv7 after the last.
func TestReviewS4NewEventIDAtPastFutureAndZero(t *testing.T) {
	prev := eventstore.NewEventID()
	for _, at := range []time.Time{{}, time.Unix(0, 0), time.Now().Add(-24 * time.Hour), time.Now(), time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)} {
		id := eventstore.NewEventIDAt(at)
		assert.Equal(t, uuid.Version(7), id.Version(), "%s at %s", id, at)
		assert.Equal(t, uuid.RFC4122, id.Variant(), "%s at %s", id, at)
		assert.Negative(t, bytes.Compare(prev[:], id[:]), "%s at %s does not sort after %s", id, at, prev)
		assert.GreaterOrEqual(t, time.Unix(id.Time().UnixTime()).UnixMilli(), time.Unix(prev.Time().UnixTime()).UnixMilli(), "%s at %s", id, at)
		prev = id
	}
}
