package command_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/command/commandtest"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func benchBus(b *testing.B, opts command.Options) *command.Bus {
	b.Helper()
	store := memory.New()
	b.Cleanup(func() { _ = store.Close() })
	reg, err := crashRegistry()
	if err != nil {
		b.Fatal(err)
	}
	typ, err := aggregate.NewType[commandtest.Counter]("counter", aggregate.Options[commandtest.Counter]{}, commandtest.CounterBindings()...)
	if err != nil {
		b.Fatal(err)
	}
	bus := command.New(store, reg, opts)
	if err := command.Route[commandtest.Increment](bus, typ); err != nil {
		b.Fatal(err)
	}
	return bus
}

// BenchmarkDispatchHotAggregate dispatches every command to one aggregate
// (memory store, default cache): load from cache, command-ID check, decide,
// encode, append, decode, apply.
func BenchmarkDispatchHotAggregate(b *testing.B) {
	bus := benchBus(b, command.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := bus.Dispatch(ctx, command.Message{ID: strconv.Itoa(i), Command: commandtest.Increment{ID: "hot"}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// BenchmarkDispatchDistinctAggregates spreads commands round-robin over
// 10,000 aggregates (memory store), more than the default cache holds, so
// most dispatches load their aggregate from the store.
func BenchmarkDispatchDistinctAggregates(b *testing.B) {
	const aggregates = 10_000
	for _, bc := range []struct {
		name  string
		cache int
	}{{"DefaultCache", 0}, {"CacheAll", aggregates}} {
		b.Run(bc.name, func(b *testing.B) {
			bus := benchBus(b, command.Options{CacheSize: bc.cache})
			ctx := context.Background()
			ids := make([]string, aggregates)
			for i := range ids {
				ids[i] = fmt.Sprint("agg", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				msg := command.Message{ID: strconv.Itoa(i), Command: commandtest.Increment{ID: ids[i%aggregates]}}
				if _, err := bus.Dispatch(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
	}
}
