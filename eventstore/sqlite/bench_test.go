package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	zs "zombiezen.com/go/sqlite"

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

// BenchmarkStreamRead100 reads a stream of 100 events (the peers harness's
// load100: a small JSON body, a correlation and a command ID) two ways in
// the same run: through the store (ReadStream, every event decoded and
// checked), and through a bare zombiezen connection stepping the same
// statement shape over the same table and columns, each column read into a
// reused buffer and nothing built: the engine's ceiling, which shows how
// much of a stream read is the store's own.
func BenchmarkStreamRead100(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b, sqlite.Options{Synchronous: sqlite.SyncNormal})
	events := make([]eventstore.EventData, 100)
	for i := range events {
		events[i] = eventstore.EventData{Type: "account.deposited", SchemaVersion: 1, Data: []byte(`{"amount":1}`),
			Metadata: eventstore.Metadata{CorrelationID: "corr-1", CommandID: "cmd-1"}}
	}
	if _, err := s.Append(ctx, "account-0000000001", eventstore.NoStream, events...); err != nil {
		b.Fatal(err)
	}
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for range b.N {
			n := 0
			for _, err := range s.ReadStream(ctx, "account-0000000001", eventstore.ReadOptions{}) {
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n != 100 {
				b.Fatalf("read %d events", n)
			}
		}
	})
	b.Run("ceiling", func(b *testing.B) {
		conn, err := zs.OpenConn(s.Path(), zs.OpenReadOnly)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		stmt, err := conn.Prepare(`SELECT position, stream, version, id, type, schema_version, data,
			correlation_id, causation_id, command_id, extra, recorded_at FROM cairn_events
			WHERE stream = ? AND version >= ? ORDER BY version LIMIT 512`)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 0, 64)
		var sum int64
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		for range b.N {
			stmt.BindText(1, "account-0000000001")
			stmt.BindInt64(2, 0)
			n := 0
			for {
				row, err := stmt.Step()
				if err != nil {
					b.Fatal(err)
				}
				if !row {
					break
				}
				for col := range 12 {
					switch stmt.ColumnType(col) {
					case zs.TypeInteger:
						sum += stmt.ColumnInt64(col)
					case zs.TypeText, zs.TypeBlob:
						buf = buf[:stmt.ColumnLen(col)]
						stmt.ColumnBytes(col, buf)
					}
				}
				n++
			}
			if err := stmt.Reset(); err != nil {
				b.Fatal(err)
			}
			if n != 100 {
				b.Fatalf("read %d rows", n)
			}
		}
		_ = sum
	})
}

// reportCPU starts counting the process's CPU time (all threads: GC
// included), and returns what reports it as cpu-ns/op: on a shared machine
// it varies much less than ns/op, which counts waits for a core.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() { b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

// processCPU is the CPU time the process has taken so far, all threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
