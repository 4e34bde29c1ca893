package memory_test

import (
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) eventstore.Store {
		s := memory.New()
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
