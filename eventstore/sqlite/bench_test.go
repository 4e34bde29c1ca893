package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// BenchmarkStore runs the shared store benchmarks on the durable defaults,
// in a directory on the same disk as BenchmarkFdatasync's file.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b testing.TB) eventstore.Store { return openTemp(b, sqlite.Options{}) })
}

// BenchmarkStoreSyncNormal is BenchmarkStore with Synchronous NORMAL, to show
// what durability against power loss costs.
func BenchmarkStoreSyncNormal(b *testing.B) {
	storetest.Benchmark(b, func(b testing.TB) eventstore.Store {
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

// BenchmarkAppend1VsFdatasync alternates one durable single-event append
// with one raw write+fdatasync of 200 bytes in the same directory, so that
// both see the same disk at the same moment: on a shared machine, two
// benchmarks run a minute apart can meet very different disks. It reports
// both rates and their ratio (the target is at least 0.9).
func BenchmarkAppend1VsFdatasync(b *testing.B) {
	s := openTemp(b, sqlite.Options{})
	f, err := os.Create(filepath.Join(filepath.Dir(s.Path()), "fdatasync.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	record := make([]byte, 200)
	data := make([]byte, 200)
	ctx := context.Background()
	var appending, syncing time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := s.Append(ctx, "bench", eventstore.Any, eventstore.EventData{
			ID: uuid.New(), Type: "order.placed", SchemaVersion: 1, Data: data,
			Metadata: eventstore.Metadata{CorrelationID: "c-1", CommandID: "cmd-1"}}); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		appending += mid.Sub(start)
		syncing += time.Since(mid)
	}
	b.ReportMetric(float64(b.N)/appending.Seconds(), "appends/s")
	b.ReportMetric(float64(b.N)/syncing.Seconds(), "syncs/s")
	b.ReportMetric(syncing.Seconds()/appending.Seconds(), "ratio")
}
