package aggregate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
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
	}, aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added))
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

// New starts an aggregate the caller knows to be new without reading the
// store; should its stream exist after all, the save is refused.
func ExampleRepository_New() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[Added](reg, "tally.added", 1)
	tallies, _ := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
		aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added))
	repo, _ := aggregate.NewRepository(store, reg, tallies, aggregate.RepositoryOptions{})

	inst, _ := repo.New("8")
	events, _ := inst.Handle(ctx, Add{N: 3})
	out, err := repo.Save(ctx, inst, events, aggregate.SaveOptions{})
	fmt.Println(out.LastVersion, err)

	again, _ := repo.New("8") // it exists now
	events, _ = again.Handle(ctx, Add{N: 1})
	_, err = repo.Save(ctx, again, events, aggregate.SaveOptions{})
	fmt.Println(errors.Is(err, eventstore.ErrWrongVersion))
	// Output:
	// 0 <nil>
	// true
}

// Cart is an aggregate in the typed style: one method per command it
// decides and one per event it applies, each taking its own Go type, so
// that no code asserts a type.
type Cart struct {
	Items   []string
	Ordered bool
}

// AddItem and Checkout are the cart's commands; ItemAdded and CheckedOut
// its events.
type (
	AddItem    struct{ Item string }
	Checkout   struct{}
	ItemAdded  struct{ Item string }
	CheckedOut struct{}
)

// Add decides AddItem.
func (c *Cart) Add(_ context.Context, cmd AddItem) ([]any, error) {
	if c.Ordered {
		return nil, errors.New("cart: already checked out")
	}
	return []any{ItemAdded(cmd)}, nil
}

// Checkout decides Checkout.
func (c *Cart) Checkout(_ context.Context, _ Checkout) ([]any, error) {
	if len(c.Items) == 0 {
		return nil, errors.New("cart: empty")
	}
	return []any{CheckedOut{}}, nil
}

// Added applies ItemAdded.
func (c *Cart) Added(e ItemAdded) { c.Items = append(c.Items, e.Item) }

// CheckedOut applies CheckedOut.
func (c *Cart) CheckedOut(CheckedOut) { c.Ordered = true }

// Bind each command type to the method that decides it and each event type
// to the method that applies it; the type routes by Go type.
func ExampleHandles() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	_ = errors.Join(
		codec.Register[ItemAdded](reg, "cart.item-added", 1),
		codec.Register[CheckedOut](reg, "cart.checked-out", 1),
	)

	carts, err := aggregate.NewType[Cart]("cart", aggregate.Options[Cart]{},
		aggregate.Handles((*Cart).Add),
		aggregate.Handles((*Cart).Checkout),
		aggregate.Applies((*Cart).Added),
		aggregate.Applies((*Cart).CheckedOut),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	repo, _ := aggregate.NewRepository(store, reg, carts, aggregate.RepositoryOptions{})

	cart, _ := repo.Load(ctx, "c1")
	for _, cmd := range []any{AddItem{Item: "tea"}, Checkout{}, AddItem{Item: "cake"}} {
		events, err := cart.Handle(ctx, cmd)
		if err != nil {
			fmt.Println("rejected:", err)
			continue
		}
		_, _ = repo.Save(ctx, cart, events, aggregate.SaveOptions{})
	}
	fmt.Println(cart.State.Items, cart.State.Ordered, cart.Version)
	// Output:
	// rejected: cart: already checked out
	// [tea] true 1
}
