package command_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
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

// The two styles of one aggregate, for BenchmarkDispatchStyles: a counter
// that takes three command types, written with the Aggregate interface's
// type switch (kept here on purpose: it is the fallback being measured)
// and with bound handlers.
type (
	styleAdd   struct{ ID string }
	styleSub   struct{ ID string }
	styleReset struct{ ID string }
	styleAdded struct {
		N int `json:"n"`
	}
	styleReseted struct{}

	switchCounter struct{ N int }
	typedCounter  struct{ N int }
)

func (c styleAdd) AggregateID() string   { return c.ID }
func (c styleSub) AggregateID() string   { return c.ID }
func (c styleReset) AggregateID() string { return c.ID }

func (s *switchCounter) Handle(_ context.Context, cmd any) ([]any, error) {
	switch cmd.(type) {
	case styleAdd:
		return []any{styleAdded{N: 1}}, nil
	case styleSub:
		return []any{styleAdded{N: -1}}, nil
	case styleReset:
		return []any{styleReseted{}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func (s *switchCounter) Apply(event any) error {
	switch e := event.(type) {
	case styleAdded:
		s.N += e.N
	case styleReseted:
		s.N = 0
	default:
		return fmt.Errorf("%w: %T", aggregate.ErrUnknownEvent, event)
	}
	return nil
}

func (s *typedCounter) add(context.Context, styleAdd) ([]any, error) {
	return []any{styleAdded{N: 1}}, nil
}
func (s *typedCounter) sub(context.Context, styleSub) ([]any, error) {
	return []any{styleAdded{N: -1}}, nil
}
func (s *typedCounter) reset(context.Context, styleReset) ([]any, error) {
	return []any{styleReseted{}}, nil
}
func (s *typedCounter) added(e styleAdded)     { s.N += e.N }
func (s *typedCounter) reseted(e styleReseted) { s.N = 0 }

// styleBus returns a bus on a memory store with the three style commands
// routed to typ.
func styleBus[T any, PT aggregate.Root[T]](b *testing.B, typ *aggregate.Type[T, PT], err error) *command.Bus {
	return styleBusWith(b, typ, err, command.Options{})
}

// styleBusWith is styleBus with opts.
func styleBusWith[T any, PT aggregate.Root[T]](b *testing.B, typ *aggregate.Type[T, PT], err error, opts command.Options) *command.Bus {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New()
	b.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	bus := command.New(store, reg, opts)
	if err := errors.Join(
		codec.Register[styleAdded](reg, "style.added", 1),
		codec.Register[styleReseted](reg, "style.reset", 1),
		command.Route[styleAdd](bus, typ),
		command.Route[styleSub](bus, typ),
		command.Route[styleReset](bus, typ),
	); err != nil {
		b.Fatal(err)
	}
	return bus
}

// BenchmarkDispatchStyles dispatches one command to a hot aggregate
// (memory store, default cache) decided and applied by the Aggregate
// interface's Handle and Apply, and by bound handlers and appliers: the
// typed path must cost no more than the type switch it replaces. Each
// aggregate takes 1,000 commands, fewer than it remembers, so that no
// duplicate check scans its stream and the cost per command does not grow
// with b.N.
func BenchmarkDispatchStyles(b *testing.B) {
	for _, bc := range []struct {
		name string
		bus  func(b *testing.B) *command.Bus
	}{
		{"Interface", func(b *testing.B) *command.Bus {
			typ, err := aggregate.NewType[switchCounter]("style", aggregate.Options[switchCounter]{})
			return styleBus(b, typ, err)
		}},
		{"Typed", func(b *testing.B) *command.Bus {
			typ, err := aggregate.NewType[typedCounter]("style", aggregate.Options[typedCounter]{},
				aggregate.Handles((*typedCounter).add),
				aggregate.Handles((*typedCounter).sub),
				aggregate.Handles((*typedCounter).reset),
				aggregate.Applies((*typedCounter).added),
				aggregate.Applies((*typedCounter).reseted))
			return styleBus(b, typ, err)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bus := bc.bus(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				msg := command.Message{ID: strconv.Itoa(i), Command: styleAdd{ID: strconv.Itoa(i / 1000)}}
				if _, err := bus.Dispatch(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
	}
}
