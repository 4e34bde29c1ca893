package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// BenchmarkCeiling sets the store's paths of two peers workloads (see the
// bench-peers harness) beside the least that the engine must do for each,
// on the store's own file and table, with its indexes, at synchronous
// NORMAL (the harness's sqlite-normal):
//
//   - save: a new stream's single event. The store reads the stream (a
//     miss: what loading a new aggregate costs) and appends expecting no
//     stream; raw steps the same read and inserts the row in a
//     transaction of its own (autocommit).
//   - cmd10: a stream of 10 events read, then one more appended at the
//     version read; every op meets a fresh stream, seeded with the timer
//     stopped. raw is the read's rows stepped (every column read, nothing
//     built) and the insert.
//
// raw runs on one bare connection with SQLite's defaults otherwise
// (checkpoints inline, every 1,000 pages) and skips everything the
// contract adds: the expected-version and ID checks, the writer's queue,
// the wake-ups, decoding. The gap between raw and store is the most any
// change to the store can win; what raw takes is the engine's share.
// Rounds of raw and store must interleave to compare (a file's speed drifts
// as it grows): run the benchmark with -count 1, several times.
func BenchmarkCeiling(b *testing.B) {
	for _, workload := range []string{"save", "cmd10"} {
		for _, via := range []string{"raw", "store"} {
			b.Run(workload+"/"+via, func(b *testing.B) { benchCeiling(b, workload, via == "raw") })
		}
	}
}

// ceilingEvent is the harness's event: a small JSON object.
var ceilingEvent = eventstore.EventData{Type: "account.deposited", SchemaVersion: 1, Data: []byte(`{"amount":1}`)}

// rawConn is the engine alone: a connection with the read and the insert
// prepared.
type rawConn struct {
	conn         *zs.Conn
	read, insert *zs.Stmt
	buf          []byte
}

func openRaw(b *testing.B, path string) *rawConn {
	conn, err := zs.OpenConn(path, zs.OpenReadWrite)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	pragma, _, err := conn.PrepareTransient("PRAGMA synchronous = NORMAL")
	if err == nil {
		_, err = pragma.Step()
		err = errors.Join(err, pragma.Finalize())
	}
	if err != nil {
		b.Fatal(err)
	}
	r := &rawConn{conn: conn, buf: make([]byte, 0, 64)}
	if r.read, err = conn.Prepare(`SELECT position, stream, version, id, type, schema_version, data,
			correlation_id, causation_id, command_id, extra, recorded_at FROM cairn_events
			WHERE stream = ? AND version >= ? ORDER BY version LIMIT 512`); err != nil {
		b.Fatal(err)
	}
	if r.insert, err = conn.Prepare(`INSERT INTO cairn_events (stream, version, id, type, schema_version, data,
			correlation_id, causation_id, command_id, extra, recorded_at, derived_id)
			VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL, ?, 0)`); err != nil {
		b.Fatal(err)
	}
	return r
}

// get steps the stream's rows, reading every column, and returns how many.
func (r *rawConn) get(stream string) (int, error) {
	r.read.BindText(1, stream)
	r.read.BindInt64(2, 0)
	n := 0
	for {
		row, err := r.read.Step()
		if err != nil {
			return n, err
		}
		if !row {
			break
		}
		for col := range 12 {
			switch r.read.ColumnType(col) {
			case zs.TypeText, zs.TypeBlob:
				r.buf = r.buf[:r.read.ColumnLen(col)]
				r.read.ColumnBytes(col, r.buf)
			default:
				_ = r.read.ColumnInt64(col)
			}
		}
		n++
	}
	return n, r.read.Reset()
}

// put inserts the event at version.
func (r *rawConn) put(stream string, version int64) error {
	id := eventstore.NewEventID()
	r.insert.BindText(1, stream)
	r.insert.BindInt64(2, version)
	r.insert.BindBytes(3, id[:])
	r.insert.BindText(4, ceilingEvent.Type)
	r.insert.BindInt64(5, int64(ceilingEvent.SchemaVersion))
	r.insert.BindBytes(6, ceilingEvent.Data)
	r.insert.BindInt64(7, 1)
	_, err := r.insert.Step()
	if rerr := r.insert.Reset(); err == nil {
		err = rerr
	}
	return err
}

func benchCeiling(b *testing.B, workload string, raw bool) {
	ctx := context.Background()
	s := openTemp(b, sqlite.Options{Synchronous: sqlite.SyncNormal})
	var r *rawConn
	if raw {
		r = openRaw(b, s.Path())
	}
	get := func(stream string) (int, error) {
		if raw {
			return r.get(stream)
		}
		n := 0
		for _, err := range s.ReadStream(ctx, stream, eventstore.Forward(0)) {
			if err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
	put := func(stream string, version uint64) error {
		if raw {
			return r.put(stream, int64(version))
		}
		expected := eventstore.NoStream
		if version > 0 {
			expected = eventstore.Exact(version - 1)
		}
		_, err := s.Append(ctx, stream, expected, ceilingEvent)
		return err
	}
	streams := 0
	next := func() string { streams++; return fmt.Sprintf("account-%d", streams) }
	seeded := make([]string, 256)
	seed := func() {
		evs := make([]eventstore.EventData, 10)
		for i := range evs {
			evs[i] = ceilingEvent
		}
		for i := range seeded {
			seeded[i] = next()
			if _, err := s.Append(ctx, seeded[i], eventstore.NoStream, evs...); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	var seeding time.Duration // CPU time of seeding, left out of cpu-ns/op
	start := processCPU()
	b.ResetTimer()
	for i := range b.N {
		stream, version := "", uint64(0)
		switch workload {
		case "save":
			stream = next()
		case "cmd10":
			if i%len(seeded) == 0 {
				b.StopTimer()
				t := processCPU()
				seed()
				seeding += processCPU() - t
				b.StartTimer()
			}
			stream, version = seeded[i%len(seeded)], 10
		}
		if n, err := get(stream); err != nil || n != int(version) {
			b.Fatalf("read %d events of %d: %v", n, version, err)
		}
		if err := put(stream, version); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-start-seeding).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
