package memory_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// The shapes of what an aggregate does with the memory store, one small
// event at a time, as the peers benchmark (save, cmd10, load100) does
// them; storetest.Benchmark measures larger batches.

// smallEvent is an aggregate's event: a zero ID (the store makes one), a
// short payload, a command ID and one Extra key.
func smallEvent() eventstore.EventData {
	return eventstore.EventData{Type: "account.deposited", SchemaVersion: 1, Data: []byte(`{"amount":1}`),
		Metadata: eventstore.Metadata{CommandID: "cmd-1", Extra: map[string]string{"tenant": "t-1"}}}
}

func streamNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "account-" + strconv.Itoa(i)
	}
	return names
}

// BenchmarkAppendNewStream is save: a stream's first event, after a read
// that finds nothing.
func BenchmarkAppendNewStream(b *testing.B) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	names := streamNames(b.N)
	e := smallEvent()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuNanos())
	for i := range b.N {
		for _, err := range s.ReadStream(ctx, names[i], eventstore.Forward(0)) {
			if err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Append(ctx, names[i], eventstore.NoStream, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendGrowing16 appends one event at a time, expecting the
// stream's version, to streams that grow to 16 events each.
func BenchmarkAppendGrowing16(b *testing.B) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	names := streamNames(b.N/16 + 1)
	e := smallEvent()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuNanos())
	for i := range b.N {
		expected := eventstore.NoStream
		if v := i % 16; v > 0 {
			expected = eventstore.Exact(uint64(v - 1))
		}
		if _, err := s.Append(ctx, names[i/16], expected, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadStream100 reads a stream of 100 small events.
func BenchmarkReadStream100(b *testing.B) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	for range 100 {
		if _, err := s.Append(ctx, "account-1", eventstore.Any, smallEvent()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuNanos())
	for range b.N {
		n := 0
		for _, err := range s.ReadStream(ctx, "account-1", eventstore.Forward(0)) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 100 {
			b.Fatalf("read %d events, want 100", n)
		}
	}
}
