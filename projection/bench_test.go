package projection_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/projection"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

// benchEvents is the length of the log each catch-up reads.
const benchEvents = 20_000

func fillBench(b *testing.B, s eventstore.Store) {
	b.Helper()
	for start := 0; start < benchEvents; start += 1000 {
		batch := make([]eventstore.EventData, 1000)
		for i := range batch {
			batch[i] = eventstore.EventData{Type: "ptest.item", SchemaVersion: 1, Data: fmt.Appendf(nil, `{"n":%d}`, start+i)}
		}
		if _, err := s.Append(context.Background(), fmt.Sprint("item-", start), eventstore.NoStream, batch...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCatchUp measures catch-up, in stored events per second, from the
// start of a 20k-event log: into a no-op handler on the memory store, and
// into a transactional SQLite read model (one counter upsert per event),
// with batches of 1 and 500, without a lease and with one (which each
// transaction renews).
func BenchmarkCatchUp(b *testing.B) {
	for _, size := range []int{1, 500} {
		b.Run(fmt.Sprintf("noop/memory/batch=%d", size), func(b *testing.B) {
			events := memory.New()
			b.Cleanup(func() { _ = events.Close() })
			fillBench(b, events)
			consumers := memory.New()
			reg := projectiontest.Registry(b)
			noop := func(context.Context, codec.Decoded) error { return nil }
			run(b, func(name string) (*projection.Consumer, error) {
				return projection.New(name, events, reg, consumers, noop, projection.Options{BatchSize: size, Logger: discard()})
			})
		})
		for _, exclusive := range []bool{false, true} {
			name := fmt.Sprintf("tx/sqlite/batch=%d", size)
			if exclusive {
				// Each transaction also renews the lease.
				name = fmt.Sprintf("tx/sqlite/exclusive/batch=%d", size)
			}
			b.Run(name, func(b *testing.B) {
				h := sqliteHarness()
				st := h.Open(b, b.TempDir())
				fillBench(b, st.Events)
				reg := projectiontest.Registry(b)
				count := func(ctx context.Context, tx *sql.Tx, d codec.Decoded) error {
					return h.Add(ctx, tx, "total", 1)
				}
				run(b, func(name string) (*projection.Consumer, error) {
					return projection.NewTx(name, st.Events, reg, st.Consumers, count,
						projection.Options{BatchSize: size, Exclusive: exclusive, Logger: discard()})
				})
			})
		}
	}
}

func run(b *testing.B, newConsumer func(name string) (*projection.Consumer, error)) {
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		c, err := newConsumer(fmt.Sprint("bench-", i))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.CatchUp(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchEvents*b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}
