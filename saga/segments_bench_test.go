package saga_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// BenchmarkSagaSegments measures what segments cost one process that runs
// them all (no lease store): the same b.N events and steps as the "saga"
// case of BenchmarkSagaStep, on SQLite, with one segment and with four,
// whose consumers each read and decode every event and record to find
// their own instances.
func BenchmarkSagaSegments(b *testing.B) {
	for _, segments := range []int{1, 4} {
		b.Run(fmt.Sprintf("sqlite/segments=%d", segments), func(b *testing.B) {
			s := openBenchStore(b, "sqlite")
			bus, reg := benchBus(b, s.events)
			pinger, err := saga.New[Pinger]("pinger", reg, saga.Options[Pinger]{})
			if err != nil {
				b.Fatal(err)
			}
			if err := errors.Join(saga.Sends[Pinger, Pong](pinger), saga.On(pinger, saga.Event[Pinger, Ping]{
				Instance: func(e Ping, _ eventstore.Metadata) string { return e.ID },
				Starts:   true,
				Handle: func(_ context.Context, st *Pinger, e Ping, out *saga.Output) error {
					st.Pings++
					out.Send(Pong(e))
					return nil
				},
			})); err != nil {
				b.Fatal(err)
			}
			r, err := saga.NewRunner(pinger, s.events, bus, saga.RunnerOptions{Checkpoints: s.consumers, Workers: benchWorkers,
				BatchSize: benchInstances, Segments: segments, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			data, err := reg.Encode(Ping{})
			if err != nil {
				b.Fatal(err)
			}
			var order sync.Mutex
			parallelN(b, b.N, func(i int) error {
				id := fmt.Sprint("p", i%benchInstances)
				e := data
				e.Data = []byte(fmt.Sprintf(`{"ID":%q}`, id))
				order.Lock()
				defer order.Unlock()
				_, err := s.events.Append(ctx, "ping-"+id, eventstore.Any, e)
				return err
			})
			b.ResetTimer()
			if err := r.CatchUp(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			st, err := r.Stats(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if st.Handled != int64(b.N) {
				b.Fatalf("%d steps handled, want %d", st.Handled, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
