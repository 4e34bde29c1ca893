package sqlite_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// BenchmarkStore runs the shared store benchmarks on the durable defaults,
// in a directory on the same disk as BenchmarkFdatasync's file.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) eventstore.Store { return openTemp(b, sqlite.Options{}) })
}

// BenchmarkStoreSyncNormal is BenchmarkStore with Synchronous NORMAL, to show
// what durability against power loss costs.
func BenchmarkStoreSyncNormal(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) eventstore.Store {
		return openTemp(b, sqlite.Options{Synchronous: sqlite.SyncNormal})
	})
}

// BenchmarkFdatasync is the disk's durable-write rate, the ceiling of
// single-writer durable appends: write a 200-byte record at the end of a
// file and fdatasync it, as a log does.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fdatasync.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	record := make([]byte, 200)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}
