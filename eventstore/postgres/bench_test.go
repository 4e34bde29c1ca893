package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
)

// BenchmarkStore runs the benchmarks that every store reports.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b testing.TB) eventstore.Store {
		return newStoreAt(b, withPoolSize(server.URL, 32), postgres.Options{})
	})
}

// BenchmarkAppendVsRawInsert compares appends with the cheapest way to put
// the same rows into PostgreSQL: a plain INSERT into a table with a
// bigserial key, on the same pool, at the same concurrency. Each writer
// appends to a stream of its own with an exact expected version, as an
// aggregate does. Compare events/s of .../store with .../raw.
//
// .../raw-indexed is the same INSERT into a table that also has the two
// unique indexes the store's contract needs ((stream, version) for
// optimistic concurrency, (stream, event ID) for idempotent appends).
// .../raw-all has all four of the store's indexes: those two, the
// (transaction ID, sequence) key that orders reads without skips, and the
// command-ID index. The gap between it and .../store is the store's own
// work (the version check, the result); the gap between it and .../raw is
// the price of the indexes, which no append path can avoid.
func BenchmarkAppendVsRawInsert(b *testing.B) {
	for _, size := range []int{1, 100} {
		for _, writers := range []int{1, 8, 32} {
			name := fmt.Sprintf("events=%d/writers=%d", size, writers)
			b.Run(name+"/raw", func(b *testing.B) { benchAppendMatrix(b, size, writers, rawPlain) })
			b.Run(name+"/raw-indexed", func(b *testing.B) { benchAppendMatrix(b, size, writers, rawIndexed) })
			b.Run(name+"/raw-all", func(b *testing.B) { benchAppendMatrix(b, size, writers, rawAllIndexes) })
			b.Run(name+"/store", func(b *testing.B) { benchAppendMatrix(b, size, writers, viaStore) })
		}
	}
}

const rawTable = `CREATE TABLE %s.raw_events (
	id             bigserial   PRIMARY KEY,
	stream         text        NOT NULL,
	version        bigint      NOT NULL,
	event_id       uuid        NOT NULL,
	type           text        NOT NULL,
	schema_version bigint      NOT NULL,
	data           bytea       NOT NULL,
	correlation_id text        NOT NULL DEFAULT '',
	causation_id   text        NOT NULL DEFAULT '',
	command_id     text        NOT NULL DEFAULT '',
	extra          jsonb,
	recorded_at    timestamptz NOT NULL DEFAULT statement_timestamp()
)`

// rawInsert is the baseline: one INSERT of all the events, with the same
// arrays the store sends, and no checks.
const rawInsert = `INSERT INTO %s.raw_events (stream, version, event_id, type, schema_version, data, correlation_id, causation_id, command_id)
	SELECT $1, $2 + e.ord - 1, e.id, e.type, e.sv, e.data, e.corr, e.caus, e.cmd
	FROM unnest($3::uuid[], $4::text[], $5::bigint[], $6::bytea[], $7::text[], $8::text[], $9::text[])
		WITH ORDINALITY AS e(id, type, sv, data, corr, caus, cmd, ord)`

type appendVia int

const (
	viaStore appendVia = iota
	rawPlain
	rawIndexed
	rawAllIndexes
)

func benchAppendMatrix(b *testing.B, size, writers int, via appendVia) {
	ctx := context.Background()
	pool := newPool(b, int32(writers)+2)
	schema := server.NewSchema("bench")
	s, err := postgres.New(ctx, pool, postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); dropSchema(b, schema) })
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, fmt.Sprintf(rawTable, q)); err != nil {
		b.Fatal(err)
	}
	if via == rawAllIndexes {
		// The store's four indexes: its key, the two unique ones, and the
		// command index.
		_, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %[1]s.raw_events DROP CONSTRAINT raw_events_pkey,
				ADD COLUMN tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(), ADD PRIMARY KEY (tx_id, id),
				ADD UNIQUE (stream, version), ADD UNIQUE (stream, event_id);
			CREATE INDEX ON %[1]s.raw_events (stream, command_id) WHERE command_id <> ''`, q))
		if err != nil {
			b.Fatal(err)
		}
	}
	if via == rawIndexed {
		_, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %[1]s.raw_events ADD UNIQUE (stream, version), ADD UNIQUE (stream, event_id)`, q))
		if err != nil {
			b.Fatal(err)
		}
	}
	insert := fmt.Sprintf(rawInsert, q)
	payload := make([]byte, 200)
	batch := func() []eventstore.EventData {
		evs := make([]eventstore.EventData, size)
		for i := range evs {
			// Time-ordered IDs, as the store assigns by default.
			evs[i] = eventstore.EventData{ID: eventstore.NewEventID(), Type: "order.placed", SchemaVersion: 1, Data: payload,
				Metadata: eventstore.Metadata{CorrelationID: "c-1", CommandID: "cmd-1"}}
		}
		return evs
	}
	appendOne := func(stream string, version uint64, evs []eventstore.EventData) error {
		if via != viaStore {
			args := rawArgs(stream, version, evs)
			_, err := pool.Exec(ctx, insert, args...)
			return err
		}
		expected := eventstore.NoStream
		if version > 0 {
			expected = eventstore.Exact(version - 1)
		}
		_, err := s.Append(ctx, stream, expected, evs...)
		return err
	}

	// Every writer's first append opens its connection and prepares its
	// statement outside the timer.
	versions := make([]uint64, writers)
	warm := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			warm[w] = appendOne(fmt.Sprintf("bench-%d", w), 0, batch())
			versions[w] = uint64(size)
		}()
	}
	wg.Wait()
	for _, err := range warm {
		if err != nil {
			b.Fatal(err)
		}
	}

	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("bench-%d", w)
			for next.Add(1) <= int64(b.N) {
				if err := appendOne(stream, versions[w], batch()); err != nil {
					failed.Store(err)
					return
				}
				versions[w] += uint64(size)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
}

func rawArgs(stream string, version uint64, evs []eventstore.EventData) []any {
	n := len(evs)
	ids := make([][16]byte, n)
	types := make([]string, n)
	schemas := make([]int64, n)
	data := make([][]byte, n)
	corr := make([]string, n)
	caus := make([]string, n)
	cmd := make([]string, n)
	for i, e := range evs {
		ids[i], types[i], schemas[i], data[i] = e.ID, e.Type, int64(e.SchemaVersion), e.Data
		corr[i], caus[i], cmd[i] = e.Metadata.CorrelationID, e.Metadata.CausationID, e.Metadata.CommandID
	}
	return []any{stream, int64(version), ids, types, schemas, data, corr, caus, cmd}
}

// newPool returns a pool of at most maxConns connections on the test
// server, closed at cleanup.
func newPool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(server.URL)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// TestBenchmarksRunDurable guards the benchmarks' honesty: they measure a
// server that flushes every commit to disk.
func TestBenchmarksRunDurable(t *testing.T) {
	if !pgtest.BenchmarksRequested() || os.Getenv(pgtest.URLEnv) != "" {
		t.Skip("only meaningful when benchmarks start their own server")
	}
	var fsync, syncCommit string
	pool := newPool(t, 1)
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &syncCommit))
	assert.Equal(t, []string{"on", "on"}, []string{fsync, syncCommit})
}
