package saga_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/saga"
)

// The benchmark's flow: a Ping event makes its instance send one Pong
// command to an aggregate of its own, so that a saga step is a step record
// plus one command dispatched.
type (
	Ping   struct{ ID string }
	Pong   struct{ ID string }
	Ponged struct{ N int }
	// Pinger is the saga's state; PongCount the aggregate's.
	Pinger    struct{ Pings int }
	PongCount struct{ N int }
)

func (c Pong) AggregateID() string { return c.ID }

func (p *PongCount) pong(context.Context, Pong) ([]any, error) {
	return []any{Ponged{N: p.N + 1}}, nil
}
func (p *PongCount) ponged(e Ponged) { p.N = e.N }

const (
	benchInstances = 1000
	benchWorkers   = 64
)

type benchStore struct {
	events    eventstore.Store
	consumers sagaConsumers
}

type sagaConsumers interface {
	storekit.CheckpointStore
	storekit.DeadLetterStore
}

func openBenchStore(b *testing.B, kind string) benchStore {
	ctx := context.Background()
	switch kind {
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return benchStore{events: s, consumers: s}
	default:
		server := pgtest.ForTest(b, pgtest.Options{Durable: true})
		s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: server.NewSchema("bench")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return benchStore{events: s, consumers: s}
	}
}

func benchBus(b *testing.B, s eventstore.Store) (*command.Bus, *codec.Registry) {
	reg := codec.NewRegistry(codec.Options{})
	if err := errors.Join(
		codec.Register[Ping](reg, "ping", 1), codec.Register[Pong](reg, "pong", 1),
		codec.Register[Ponged](reg, "ponged", 1), codec.Register[Pinger](reg, "pinger.state", 1),
	); err != nil {
		b.Fatal(err)
	}
	typ, err := aggregate.NewType[PongCount]("pong", aggregate.Options[PongCount]{},
		aggregate.Handles((*PongCount).pong), aggregate.Applies((*PongCount).ponged))
	if err != nil {
		b.Fatal(err)
	}
	bus := command.New(s, reg, command.Options{CacheSize: benchInstances})
	if err := command.Route[Pong](bus, typ); err != nil {
		b.Fatal(err)
	}
	return bus, reg
}

// parallelN runs fn(i) for i in [0, n) on benchWorkers goroutines.
func parallelN(b *testing.B, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSagaStep measures saga steps on the durable SQLite and
// PostgreSQL stores beside the command bus alone in the same run: "bus" is
// b.N commands dispatched by 64 goroutines to 1,000 aggregates; "saga" is
// b.N stored events handled by 1,000 saga instances, each step recording
// its state and one command that the outbox then dispatches to the same
// kind of aggregate. The target: a saga step costs at most 3x a
// bare dispatch (compare their ns/op).
func BenchmarkSagaStep(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind+"/bus", func(b *testing.B) {
			s := openBenchStore(b, kind)
			bus, _ := benchBus(b, s.events)
			ctx := context.Background()
			b.ResetTimer()
			parallelN(b, b.N, func(i int) error {
				_, err := bus.Dispatch(ctx, command.Message{ID: fmt.Sprint("c", i), Command: Pong{ID: fmt.Sprint("p", i%benchInstances)}})
				return err
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
		b.Run(kind+"/saga", func(b *testing.B) {
			s := openBenchStore(b, kind)
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
				BatchSize: benchInstances, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			// The events to handle, round-robin over the instances, so that
			// every batch steps many instances at once.
			data, err := reg.Encode(Ping{})
			if err != nil {
				b.Fatal(err)
			}
			var order sync.Mutex
			parallelN(b, b.N, func(i int) error {
				id := fmt.Sprint("p", i%benchInstances)
				e := data
				e.Data = []byte(fmt.Sprintf(`{"ID":%q}`, id))
				order.Lock() // appends in i order, for the round-robin
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
