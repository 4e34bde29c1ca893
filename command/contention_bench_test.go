package command_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/retry"
)

// BenchmarkContendedGiveUps measures how often a command gives up on one
// hot aggregate that two processes write at once, for several Retry.Attempts:
// two stores on their own connection pools (as two processes have), a bus
// on each, four goroutines per bus dispatching increments of one counter
// with the default backoff. It reports the share of dispatches that returned
// a contention error ("giveups/1k") and the attempts per command. This is
// the measurement behind [command.DefaultAttempts].
func BenchmarkContendedGiveUps(b *testing.B) {
	server := pgtest.ForTest(b, pgtest.Options{})
	reg, err := crashRegistry()
	if err != nil {
		b.Fatal(err)
	}
	typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{}, commandtest.CounterBindings()...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, maxAttempts := range []int{5, 10, 15, 20} {
		b.Run(fmt.Sprint("MaxAttempts=", maxAttempts), func(b *testing.B) {
			schema := server.NewSchema("contention")
			var buses []*command.Bus
			for range 2 {
				s, err := postgres.Open(ctx, server.URL, postgres.Options{Schema: schema})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				bus := command.New(s, reg, command.Options{Retry: retry.Policy{Attempts: maxAttempts}})
				if err := command.Route[commandtest.Increment](bus, typ); err != nil {
					b.Fatal(err)
				}
				buses = append(buses, bus)
			}
			const perBus = 4
			var next, giveUps, attempts atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range perBus * len(buses) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bus := buses[w%len(buses)]
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						res, err := bus.Dispatch(ctx, command.Message{ID: fmt.Sprint("c", i), Command: commandtest.Increment{ID: "hot"}})
						attempts.Add(int64(res.Attempts))
						switch {
						case errors.Is(err, command.ErrContention):
							giveUps.Add(1)
						case err != nil:
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(1000*float64(giveUps.Load())/float64(b.N), "giveups/1k")
			b.ReportMetric(float64(attempts.Load())/float64(b.N), "attempts/cmd")
		})
	}
}
