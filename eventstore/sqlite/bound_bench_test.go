package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// BenchmarkInsertGroupsOf16 is the ceiling of 16 concurrent appenders on
// this store's schema: one goroutine commits transactions of 16
// single-event inserts into 16 streams, through the writer's prepared
// statements, with none of an append's work (no version or ID checks, no
// queue, no goroutines to wake). Durable (FULL) and not (NORMAL): whatever
// the store does, 16 appenders cannot beat these rates, which the index
// pages each event dirties and the sync decide.
func BenchmarkInsertGroupsOf16(b *testing.B) {
	for _, sync := range []Synchronous{SyncFull, SyncNormal} {
		b.Run(sync.pragma(), func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "events.db"), Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			c := s.w.appends
			data := make([]byte, 200)
			var versions [16]uint64
			b.ResetTimer()
			for range b.N {
				if err := step(c.begin); err != nil {
					b.Fatal(err)
				}
				for w := range versions {
					e := eventstore.EventData{ID: uuid.New(), Type: "order.placed", SchemaVersion: 1, Data: data,
						Metadata: eventstore.Metadata{CorrelationID: "c-1", CommandID: "cmd-1"}}
					if _, err := c.insertEvent(fmt.Sprint("bench-", w), versions[w], &e, nil, 1, false); err != nil {
						b.Fatal(err)
					}
					versions[w]++
				}
				if err := step(c.commit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(versions))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
