package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

// BenchmarkCeiling sets the store's paths of the peers workloads (see
// the bench-peers harness) beside the least that pgx and the server must
// do for each on the store's own table, with its indexes:
//
//   - save: one new stream's single event, after a read of the stream (a
//     miss), which the harness's save makes to load the new aggregate. raw
//     is the SELECT of the read and one INSERT ... RETURNING of the
//     position, in a transaction of its own (autocommit).
//   - conc16: 16 goroutines doing save's work, each on a stream of its own,
//     per event. raw inserts the next version the writer knows.
//   - load100: one stream of 100 events read in full. raw is one SELECT of
//     the rows, scanned into the same Go types, not turned into events.
//   - cmd10: a stream of 10 events read, then one more event appended to it
//     at the version read. raw is load's SELECT and save's INSERT.
//
// save and cmd10 also run the whole framework (cairn): the harness's Cairn
// paths, the repository's Load and Save of a new aggregate, and a command
// through the bus on an aggregate of 10 events, so that the peers
// benchmark's cells compare with the engine's share on the same server.
//
// raw skips everything the contract adds (the expected-version check,
// idempotency, wake-ups), so the gap between raw and store is the most that
// any change to the store can win; what raw takes is the engine's share.
func BenchmarkCeiling(b *testing.B) {
	for _, name := range []string{"save", "conc16", "load100", "cmd10"} {
		for _, via := range []string{"raw", "store", "cairn"} {
			if via == "cairn" && (name == "conc16" || name == "load100") {
				continue // the store's path is the framework's, but for decoding
			}
			b.Run(name+"/"+via, func(b *testing.B) { benchCeiling(b, name, via) })
		}
	}
}

// ceilingWorld is a store and its pool, with the raw statements on the
// store's table.
type ceilingWorld struct {
	s             *postgres.Store
	insert, query string
	n             atomic.Int64 // stream names
}

func newCeilingWorld(b *testing.B) *ceilingWorld {
	s := newStoreAt(b, withPoolSize(server.URL, 32), postgres.Options{})
	q := pgx.Identifier{s.Schema()}.Sanitize()
	return &ceilingWorld{
		s: s,
		insert: `INSERT INTO ` + q + `.events (stream, version, event_id, type, schema_version, data,
			correlation_id, causation_id, command_id, extra)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING tx_id, seq`,
		query: `SELECT tx_id, seq, stream, version, event_id, type, schema_version, data,
			correlation_id, causation_id, command_id, extra, recorded_at
			FROM ` + q + `.events WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`,
	}
}

// ceilingData is the harness's event: a small JSON object.
var ceilingData = []byte(`{"amount":1}`)

func ceilingEvent() eventstore.EventData {
	return eventstore.EventData{ID: eventstore.NewEventID(), Type: "account.deposited", SchemaVersion: 1, Data: ceilingData}
}

func (w *ceilingWorld) stream() string { return fmt.Sprintf("ceiling-%d", w.n.Add(1)) }

// put writes one event at version; expected is what the store is told.
func (w *ceilingWorld) put(ctx context.Context, raw bool, stream string, version uint64) error {
	e := ceilingEvent()
	if raw {
		var txID uint64
		var seq int64
		return w.s.Pool().QueryRow(ctx, w.insert, stream, int64(version), pgtype.UUID{Bytes: e.ID, Valid: true}, e.Type,
			int64(e.SchemaVersion), e.Data, "", "", "", nil).Scan(&txID, &seq)
	}
	expected := eventstore.NoStream
	if version > 0 {
		expected = eventstore.Exact(version - 1)
	}
	_, err := w.s.Append(ctx, stream, expected, e)
	return err
}

// get reads stream in full and returns how many events it has.
func (w *ceilingWorld) get(ctx context.Context, raw bool, stream string) (int, error) {
	n := 0
	if raw {
		var (
			txID                         uint64
			seq, version, schemaVersion  int64
			name, typ, corr, caus, cmdID string
			id                           pgtype.UUID
			data, extra                  []byte
			at                           time.Time
		)
		rows, err := w.s.Pool().Query(ctx, w.query, stream, int64(0), 500)
		if err != nil {
			return 0, err
		}
		_, err = pgx.ForEachRow(rows, []any{&txID, &seq, &name, &version, &id, &typ, &schemaVersion, &data,
			&corr, &caus, &cmdID, &extra, &at}, func() error { n++; return nil })
		return n, err
	}
	for _, err := range w.s.ReadStream(ctx, stream, eventstore.Forward(0)) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// save is one op of the save workload on a new stream: through the
// framework when f is set, the store's or raw pgx's read and insert
// otherwise.
func (w *ceilingWorld) save(ctx context.Context, f *ceilingFramework, raw bool) error {
	stream := w.stream()
	if f != nil {
		return f.save(ctx, strings.TrimPrefix(stream, "ceiling-"))
	}
	if n, err := w.get(ctx, raw, stream); err != nil || n != 0 {
		return fmt.Errorf("read %d events of a new stream: %v", n, err)
	}
	return w.put(ctx, raw, stream, 0)
}

// cmd10 is one op of the cmd10 workload on stream, which has 10 events:
// a command through the framework when f is set, the store's or raw
// pgx's read and insert otherwise.
func (w *ceilingWorld) cmd10(ctx context.Context, f *ceilingFramework, raw bool, stream string) error {
	if f != nil {
		return f.command(ctx, strings.TrimPrefix(stream, "ceiling-"))
	}
	n, err := w.get(ctx, raw, stream)
	if err != nil || n != 10 {
		return fmt.Errorf("read %d events of a 10-event stream: %v", n, err)
	}
	return w.put(ctx, raw, stream, uint64(n))
}

// seed writes n streams of length events each, through the store.
func (w *ceilingWorld) seed(b *testing.B, n, length int) []string {
	streams := make([]string, n)
	for i := range streams {
		streams[i] = w.stream()
		evs := make([]eventstore.EventData, length)
		for j := range evs {
			evs[j] = ceilingEvent()
		}
		if _, err := w.s.Append(context.Background(), streams[i], eventstore.NoStream, evs...); err != nil {
			b.Fatal(err)
		}
	}
	return streams
}

func benchCeiling(b *testing.B, workload, via string) {
	raw := via == "raw"
	ctx := context.Background()
	w := newCeilingWorld(b)
	b.ReportAllocs()
	var cpu, seeding, server, serverSeeding time.Duration
	defer func() {
		b.ReportMetric(float64((procCPU()-cpu-seeding).Nanoseconds())/float64(b.N), "cpu-ns/op")
		if now, ok := serverCPU(); ok {
			b.ReportMetric(float64((now-server-serverSeeding).Nanoseconds())/float64(b.N), "server-cpu-ns/op")
		}
	}()
	var f *ceilingFramework // the whole framework's path, for via "cairn"
	if via == "cairn" {
		f = newCeilingFramework(b, w.s)
	}
	start := func() { cpu = procCPU(); server, _ = serverCPU() }
	start()
	switch workload {
	case "save":
		b.ResetTimer()
		for range b.N {
			if err := w.save(ctx, f, raw); err != nil {
				b.Fatal(err)
			}
		}
	case "conc16":
		streams := w.seed(b, 16, 1)
		var next atomic.Int64
		var failed atomic.Value
		var wg sync.WaitGroup
		start()
		b.ResetTimer()
		for g := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for v := uint64(1); next.Add(1) <= int64(b.N); v++ {
					if err := w.put(ctx, raw, streams[g], v); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	case "load100":
		stream := w.seed(b, 1, 100)[0]
		start()
		b.ResetTimer()
		for range b.N {
			if n, err := w.get(ctx, raw, stream); err != nil || n != 100 {
				b.Fatalf("read %d events, %v", n, err)
			}
		}
	case "cmd10":
		var streams []string
		b.ResetTimer()
		for i := range b.N {
			if i%256 == 0 {
				b.StopTimer()
				t := procCPU()
				st, _ := serverCPU()
				streams = w.seed(b, 256, 10)
				seeding += procCPU() - t
				st2, _ := serverCPU()
				serverSeeding += st2 - st
				b.StartTimer()
			}
			if err := w.cmd10(ctx, f, raw, streams[i%256]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
}
