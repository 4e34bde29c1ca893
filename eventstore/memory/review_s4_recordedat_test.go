package memory_test

// Review s4: the memory store reads its clock once per append, before its
// lock, for both RecordedAt and the IDs it makes.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Appends from many goroutines, to shared and own streams, of one to six
// events with and without IDs: every event is recorded in UTC within its
// append's call, the IDs the store made are UUIDv7s of no earlier a
// millisecond than the event's RecordedAt, one append's events share one
// RecordedAt, and no ID repeats.
func TestReviewS4ConcurrentAppendsRecordAtTheirIDsTime(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })

	type window struct{ before, after time.Time }
	var mu sync.Mutex
	windows := map[uint64]window{} // by position
	given := map[uuid.UUID]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := i%6 + 1
				evs := make([]eventstore.EventData, n)
				for k := range evs {
					evs[k] = eventstore.EventData{Type: "t", SchemaVersion: 1, Data: []byte(`{}`)}
					if (i+k)%5 == 0 {
						evs[k].ID = uuid.New() // the caller's own
						mu.Lock()
						given[evs[k].ID] = true
						mu.Unlock()
					}
				}
				stream := fmt.Sprint("own-", g)
				if i%2 == 0 {
					stream = "shared"
				}
				before := time.Now()
				res, err := s.Append(ctx, stream, eventstore.Any, evs...)
				after := time.Now()
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				for p := res.Position.Major - uint64(n) + 1; p <= res.Position.Major; p++ {
					windows[p] = window{before, after}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	seen := map[uuid.UUID]bool{}
	byPosition := map[uint64]time.Time{}
	count := 0
	for e, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		count++
		w, ok := windows[e.Position.Major]
		require.True(t, ok, "position %d was not appended", e.Position.Major)
		assert.Equal(t, time.UTC, e.RecordedAt.Location(), "event at %d", e.Position.Major)
		assert.False(t, e.RecordedAt.Before(w.before.Round(0)) || e.RecordedAt.After(w.after.Round(0)),
			"event at %d recorded at %s, outside its append's [%s, %s]", e.Position.Major, e.RecordedAt, w.before, w.after)
		assert.False(t, seen[e.ID], "ID %s stored twice", e.ID)
		seen[e.ID] = true
		byPosition[e.Position.Major] = e.RecordedAt
		if !given[e.ID] {
			assert.Equal(t, uuid.Version(7), e.ID.Version())
			assert.Equal(t, uuid.RFC4122, e.ID.Variant())
			assert.GreaterOrEqual(t, time.Unix(e.ID.Time().UnixTime()).UnixMilli(), e.RecordedAt.UnixMilli(), "ID %s of the event at %d", e.ID, e.Position.Major)
		}
	}
	assert.Equal(t, len(windows), count)
	// One append's events share their reading.
	for p, w := range windows {
		if q := p + 1; windows[q] == w {
			assert.Equal(t, byPosition[p], byPosition[q], "positions %d and %d of one append", p, q)
		}
	}
}
