package aggregate_test

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// The repository is what the command bus builds on; use it directly to load
// an aggregate, or to save a decision outside the bus.
func ExampleRepository() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[Added](reg, "tally.added", 1)

	tallies, _ := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{
		New: func(id string) *Tally { return &Tally{ID: id} },
	})
	repo, _ := aggregate.NewRepository(store, reg, tallies, aggregate.RepositoryOptions{})

	inst, _ := repo.Load(ctx, "7") // a new tally: no events yet
	events, _ := inst.Handle(ctx, Add{N: 5})
	out, err := repo.Save(ctx, inst, events, aggregate.SaveOptions{CommandID: "msg-1"})
	fmt.Println(out.Events, out.LastVersion, err)

	again, _ := repo.Load(ctx, "7")
	fmt.Println(again.Stream, again.Version, again.State.Total)
	// Output:
	// [{5}] 0 <nil>
	// tally-7 0 5
}
