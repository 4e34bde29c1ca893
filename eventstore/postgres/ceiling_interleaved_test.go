package postgres_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// BenchmarkCeilingInterleaved runs save's and cmd10's three variants of
// BenchmarkCeiling (raw, store, cairn) one operation each in turn, in one
// process on one server, the order turned by one every operation, and
// reports each variant's mean time and its ratio to raw. Run one after the
// other, the variants meet a server that grows, checkpoints and shares its
// disk with whatever else the machine does at that moment: between runs a
// minute apart the rate moves by more than the gap measured. Interleaved,
// every variant meets the same server, table and disk at the same moments,
// so the ratios tell the client's share apart from the machine's drift.
//
// cairn's framework runs on a store that times its calls, so that
// cairn-outside-store-ns/op is the framework's own time on the client:
// everything of a command or a save but the store's reads and appends.
func BenchmarkCeilingInterleaved(b *testing.B) {
	for _, name := range []string{"save", "cmd10"} {
		b.Run(name, func(b *testing.B) { benchCeilingInterleaved(b, name) })
	}
}

func benchCeilingInterleaved(b *testing.B, workload string) {
	ctx := context.Background()
	w := newCeilingWorld(b)
	timed := &timedStore{Store: w.s}
	f := newCeilingFramework(b, timed)
	variants := []string{"raw", "store", "cairn"}
	var took [3]time.Duration
	var streams [3][]string // cmd10's seeded streams, per variant
	op := func(v, i int) error {
		var fv *ceilingFramework // the framework's path for cairn only
		if variants[v] == "cairn" {
			fv = f
		}
		if workload == "save" {
			return w.save(ctx, fv, v == 0)
		}
		return w.cmd10(ctx, fv, v == 0, streams[v][i%len(streams[v])])
	}
	b.ResetTimer()
	for i := range b.N {
		if workload == "cmd10" && i%256 == 0 {
			b.StopTimer()
			for v := range streams {
				streams[v] = w.seed(b, 256, 10)
			}
			b.StartTimer()
		}
		for k := range variants {
			v := (i + k) % len(variants)
			start := time.Now()
			if err := op(v, i); err != nil {
				b.Fatal(err)
			}
			took[v] += time.Since(start)
		}
	}
	b.StopTimer()
	for v, name := range variants {
		b.ReportMetric(float64(took[v].Nanoseconds())/float64(b.N), name+"-ns/op")
	}
	b.ReportMetric(float64((took[2]-timed.took).Nanoseconds())/float64(b.N), "cairn-outside-store-ns/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "store/raw")
	b.ReportMetric(float64(took[2])/float64(took[0]), "cairn/raw")
}

// timedStore is a store that adds up the time its appends and stream reads
// take. It hands out its own stream page reader, timed, so that readers
// that take a store's pages (storekit.PagedStreams) are timed too.
type timedStore struct {
	*postgres.Store
	took time.Duration
}

func (t *timedStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	defer t.time(time.Now())
	return t.Store.Append(ctx, stream, expected, events...)
}

func (t *timedStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	read, size, _ := t.StreamPages()
	return storekit.ReadStreamPagesInto(ctx, stream, opts, read, size)
}

func (t *timedStore) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	read, size, _ := t.Store.StreamPages()
	return func(ctx context.Context, dst []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
		defer t.time(time.Now())
		return read(ctx, dst, stream, from, backward, limit)
	}, size, t
}

func (t *timedStore) time(start time.Time) { t.took += time.Since(start) }
