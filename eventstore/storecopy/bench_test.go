package storecopy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storecopy"
)

// benchEvents is the size of the benchmarks' log: 100 streams of 100
// events, each stream written in one append of 100, so that the copy's
// appends are the batches of 100 that BenchmarkPostgresAppend100 measures.
const (
	benchStreams   = 100
	benchBatch     = 100
	benchEvents    = benchStreams * benchBatch
	benchEventSize = 200
)

func benchBatchOf(stream int) []eventstore.EventData {
	evs := make([]eventstore.EventData, benchBatch)
	for i := range evs {
		evs[i] = eventstore.EventData{Type: "bench.event", SchemaVersion: 1,
			Data:     make([]byte, benchEventSize),
			Metadata: eventstore.Metadata{CorrelationID: fmt.Sprint("corr-", stream), Extra: map[string]string{"k": "v"}}}
	}
	return evs
}

// BenchmarkCopySQLiteToPostgres copies 10,000 events from a SQLite file
// into a fresh PostgreSQL schema per iteration: "copy" without the
// counting and verification passes, "full" with them, "consumers" as
// "copy" carrying 20 consumers' checkpoints spread over the log. Compare its
// events/s with BenchmarkPostgresAppend100's, run in the same go test.
func BenchmarkCopySQLiteToPostgres(b *testing.B) {
	ctx := context.Background()
	src := openSQLite(b, filepath.Join(b.TempDir(), "bench.db"))
	for s := range benchStreams {
		_, err := src.Append(ctx, fmt.Sprint("bench-", s), eventstore.NoStream, benchBatchOf(s)...)
		require.NoError(b, err)
	}
	i := 0
	for e, err := range src.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(b, err)
		if i%(benchEvents/20) == 0 {
			require.NoError(b, src.SaveCheckpoint(ctx, fmt.Sprint("consumer-", i), eventstore.Start, e.Position, 0))
		}
		i++
	}
	for _, c := range []struct {
		name string
		opts storecopy.Options
	}{
		{"copy", storecopy.Options{NoCount: true, NoVerify: true}},
		{"full", storecopy.Options{}},
		{"consumers", storecopy.Options{NoCount: true, NoVerify: true, Consumers: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				to := newPostgres(b)
				b.StartTimer()
				r, err := storecopy.Copy(ctx, src, to, c.opts)
				require.NoError(b, err)
				require.Equal(b, int64(benchEvents), r.Copied)
			}
			b.ReportMetric(float64(benchEvents*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkPostgresAppend100 is the target's batch-append rate: 10,000
// events appended in batches of 100, to a fresh schema per iteration.
func BenchmarkPostgresAppend100(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		to := newPostgres(b)
		batches := make([][]eventstore.EventData, benchStreams)
		for s := range batches {
			batches[s] = benchBatchOf(s)
		}
		b.StartTimer()
		for s, evs := range batches {
			_, err := to.Append(ctx, fmt.Sprint("bench-", s), eventstore.NoStream, evs...)
			require.NoError(b, err)
		}
	}
	b.ReportMetric(float64(benchEvents*b.N)/b.Elapsed().Seconds(), "events/s")
}
