package aggregate_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// BenchmarkLoad loads a 10,000-event aggregate from the memory store: by
// replaying every event, and from a snapshot 100 events before the end.
// events/s counts the stream's events a load brings the state through per
// second; applied/s only those decoded and applied.
func BenchmarkLoad(b *testing.B) {
	const streamLen, tail = 10_000, 100
	for _, bc := range []struct {
		name     string
		snapshot bool
	}{{"FullReplay", false}, {"Snapshot", true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			store := memory.New()
			b.Cleanup(func() { _ = store.Close() })
			snaps := memory.New()
			reg := newRegistry(b)
			every := uint64(0)
			if bc.snapshot {
				every = streamLen * 10 // never by itself: the benchmark plants one
			}
			typ := tallyType(b, every)
			repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{Snapshots: snaps})
			if err != nil {
				b.Fatal(err)
			}
			inst, err := repo.Load(ctx, "big")
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < streamLen; i += 100 {
				batch := make([]any, 100)
				for j := range batch {
					batch[j] = Added{N: 1}
				}
				if _, err := repo.Save(ctx, inst, batch, aggregate.SaveOptions{}); err != nil {
					b.Fatal(err)
				}
				if bc.snapshot && inst.Version == streamLen-tail-1 {
					raw, err := reg.EncodeValue(inst.State)
					if err != nil {
						b.Fatal(err)
					}
					err = snaps.SaveSnapshot(ctx, storekit.Snapshot{Stream: inst.Stream, Version: inst.Version, Type: raw.Type, SchemaVersion: raw.Version, Data: raw.Data})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			applied := streamLen
			if bc.snapshot {
				applied = tail
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				got, err := repo.Load(ctx, "big")
				if err != nil {
					b.Fatal(err)
				}
				if got.State.Total != streamLen {
					b.Fatalf("loaded total %d, want %d", got.State.Total, streamLen)
				}
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*streamLen)/secs, "events/s")
			b.ReportMetric(float64(b.N*applied)/secs, "applied/s")
		})
	}
}

// switchTally is Tally written against the Aggregate interface, with the
// type switches that bound handlers replace: kept on purpose, as the
// fallback BenchmarkDecideAndApply compares them with.
type switchTally struct{ Total int }

func (t *switchTally) Handle(_ context.Context, cmd any) ([]any, error) {
	switch c := cmd.(type) {
	case Add:
		return []any{Added(c)}, nil
	case Undo:
		return []any{Removed{N: 1}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func (t *switchTally) Apply(event any) error {
	switch e := event.(type) {
	case Added:
		t.Total += e.N
	case Removed:
		t.Total -= e.N
	default:
		return fmt.Errorf("%w: %T", aggregate.ErrUnknownEvent, event)
	}
	return nil
}

// BenchmarkDecideAndApply isolates what the bus pays to reach user code:
// one command decided and its event applied, through a Type, by the
// Aggregate interface's type switches and by bound handlers and appliers.
func BenchmarkDecideAndApply(b *testing.B) {
	var cmd any = Add{N: 1}
	b.Run("Interface", func(b *testing.B) {
		typ, err := aggregate.NewType[switchTally]("tally", aggregate.Options[switchTally]{})
		if err != nil {
			b.Fatal(err)
		}
		decideAndApply(b, typ, &switchTally{}, cmd)
	})
	b.Run("Typed", func(b *testing.B) {
		typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
			aggregate.Handles((*Tally).add), aggregate.Handles(noApply),
			aggregate.Applies((*Tally).added), aggregate.Applies(func(t *Tally, e Removed) { t.Total -= e.N }))
		if err != nil {
			b.Fatal(err)
		}
		decideAndApply(b, typ, &Tally{}, cmd)
	})
}

// decideAndApply has state decide cmd and apply its first event, b.N times.
func decideAndApply[T any, PT aggregate.Root[T]](b *testing.B, typ *aggregate.Type[T, PT], state PT, cmd any) {
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		events, err := typ.Handle(ctx, state, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if err := typ.Apply(state, events[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate makes new aggregates on the memory store, one event
// each: Load (a miss: the stream does not exist), Handle, Save; and with
// New, which spares the miss. The store keeps every stream, as a
// service's does, so the lookups are those of a store that grows.
func BenchmarkCreate(b *testing.B) {
	for _, load := range []bool{true, false} {
		name := "New"
		if load {
			name = "Load"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			store := memory.New()
			b.Cleanup(func() { _ = store.Close() })
			repo, err := aggregate.NewRepository(store, newRegistry(b), tallyType(b, 0), aggregate.RepositoryOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := "a" + strconv.Itoa(i)
				var inst *aggregate.Instance[Tally, *Tally]
				if load {
					inst, err = repo.Load(ctx, id)
				} else {
					inst, err = repo.New(id)
				}
				if err != nil {
					b.Fatal(err)
				}
				events, err := inst.Handle(ctx, Add{N: 1})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := repo.Save(ctx, inst, events, aggregate.SaveOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
