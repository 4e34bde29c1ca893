package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Benchmark runs the benchmarks every store reports, so that figures are
// comparable across stores: appends of 1 and of 100 events, 16 concurrent
// single-event appenders, reads of a 100-event and a 10k-event stream,
// ReadAll, and subscription catch-up. Events carry 200 bytes of data.
// newStore is the factory the store's [Run] takes.
func Benchmark(b *testing.B, newStore Factory) {
	b.Run("Append1", func(b *testing.B) { benchAppend(b, newStore(b), 1, 1) })
	b.Run("Append100", func(b *testing.B) { benchAppend(b, newStore(b), 100, 1) })
	b.Run("Append1Concurrent16", func(b *testing.B) { benchAppend(b, newStore(b), 1, 16) })
	b.Run("ReadStream100", func(b *testing.B) { benchReadStream(b, newStore(b), 100) })
	b.Run("ReadStream10k", func(b *testing.B) { benchReadStream(b, newStore(b), 10_000) })
	b.Run("ReadAll", func(b *testing.B) { benchReadAll(b, newStore(b)) })
	b.Run("SubscribeCatchUp", func(b *testing.B) { benchSubscribe(b, newStore(b)) })
}

// payload is 200 bytes of JSON, the size of a typical small event.
var payload = func() []byte {
	head := `{"order":"order-000042","customer":"customer-7","lines":3,"total":"129.90","note":"`
	return []byte(head + strings.Repeat("x", 200-len(head)-2) + `"}`)
}()

func benchEvents(n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{ID: uuid.New(), Type: "order.placed", SchemaVersion: 1, Data: payload,
			Metadata: eventstore.Metadata{CorrelationID: "c-1", CommandID: "cmd-1"}}
	}
	return out
}

// reportEvents reports events per second of elapsed benchmark time.
func reportEvents(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// benchAppend has concurrency writers append batches of size events, each
// writer to a stream of its own.
func benchAppend(b *testing.B, s eventstore.Store, size, concurrency int) {
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("bench-%d-%d", w, b.N)
			for next.Add(1) <= int64(b.N) {
				if _, err := s.Append(ctx, stream, eventstore.Any, benchEvents(size)...); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	reportEvents(b, b.N*size)
}

// fill writes n events to stream in batches.
func fill(b *testing.B, s eventstore.Store, stream string, n int) {
	for n > 0 {
		batch := min(n, 500)
		if _, err := s.Append(context.Background(), stream, eventstore.Any, benchEvents(batch)...); err != nil {
			b.Fatal(err)
		}
		n -= batch
	}
}

func benchReadStream(b *testing.B, s eventstore.Store, length int) {
	fill(b, s, "bench-read", length)
	b.ResetTimer()
	for range b.N {
		count := 0
		for _, err := range s.ReadStream(context.Background(), "bench-read", eventstore.Forward(0)) {
			if err != nil {
				b.Fatal(err)
			}
			count++
		}
		if count != length {
			b.Fatalf("read %d events, want %d", count, length)
		}
	}
	reportEvents(b, b.N*length)
}

const logLength = 10_000

func benchReadAll(b *testing.B, s eventstore.Store) {
	for i := range 10 {
		fill(b, s, fmt.Sprintf("bench-all-%d", i), logLength/10)
	}
	b.ResetTimer()
	for range b.N {
		count := 0
		for _, err := range s.ReadAll(context.Background(), eventstore.Start, eventstore.Filter{}) {
			if err != nil {
				b.Fatal(err)
			}
			count++
		}
		if count != logLength {
			b.Fatalf("read %d events, want %d", count, logLength)
		}
	}
	reportEvents(b, b.N*logLength)
}

// benchSubscribe measures how fast a subscriber catches up on a log.
func benchSubscribe(b *testing.B, s eventstore.Store) {
	for i := range 10 {
		fill(b, s, fmt.Sprintf("bench-sub-%d", i), logLength/10)
	}
	b.ResetTimer()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		count := 0
		for _, err := range s.Subscribe(ctx, eventstore.Start, eventstore.Filter{}) {
			if err != nil {
				cancel()
				b.Fatal(err)
			}
			if count++; count == logLength {
				break
			}
		}
		cancel()
	}
	reportEvents(b, b.N*logLength)
}
