package kurrentdb_test

import (
	"context"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

// BenchmarkStore runs the shared store benchmarks against the protocol-level
// test server, in this process, over loopback TCP: what the store and the
// client cost, not what a KurrentDB node does (docs/benchmarks.md).
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b testing.TB) eventstore.Store { return open(b, newTestServer(b)) })
}

// BenchmarkRawClient is the baseline of BenchmarkStore's appends: the
// client alone appending one event (or 100) with a new ID, no expected
// version, no read back, to the same kind of server.
func BenchmarkRawClient(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(map[int]string{1: "Append1", 100: "Append100"}[n], func(b *testing.B) {
			srv, err := testserver.Start(testserver.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			cfg, err := esdb.ParseConnectionString(srv.URL())
			if err != nil {
				b.Fatal(err)
			}
			cfg.Logger = esdb.NoopLogging()
			cli, err := esdb.NewClient(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			data := make([]byte, 200)
			for i := range data {
				data[i] = 'x'
			}
			events := make([]esdb.EventData, n)
			b.ResetTimer()
			for i := range b.N {
				for j := range events {
					events[j] = esdb.EventData{EventID: uuid.New(), EventType: "order.placed", ContentType: esdb.ContentTypeBinary, Data: data}
				}
				if _, err := cli.AppendToStream(context.Background(), "raw-"+uuid.NewString()[:8], esdb.AppendToStreamOptions{}, events...); err != nil {
					b.Fatal(err, i)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
