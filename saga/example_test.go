package saga_test

import (
	"context"
	"fmt"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/reservation"
	"github.com/cairn-es/cairn/saga"
)

// A sale reacts to an order placed, delivered here from outside the store
// twice (a broker redelivering it): the second delivery is a duplicate, and
// the sale's one step records the command to send.
func ExampleRunner_Deliver() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	reg := codec.NewRegistry(codec.Options{})
	if err := reservation.Register(reg); err != nil {
		panic(err)
	}
	sale, err := reservation.NewSale(reg)
	if err != nil {
		panic(err)
	}
	runner, err := saga.NewRunner(sale, store, nil, saga.RunnerOptions{})
	if err != nil {
		panic(err)
	}
	placed := reservation.OrderPlaced{OrderID: "o-1", Seats: 2, Amount: 120}
	for range 2 {
		out, err := runner.Deliver(ctx, saga.Delivery{Source: "orders", Sequence: 0, Event: placed})
		if err != nil {
			panic(err)
		}
		fmt.Println(out)
	}
	x, err := runner.Explain(ctx, "o-1")
	if err != nil {
		panic(err)
	}
	for _, c := range x.LastStep.Commands {
		fmt.Printf("%s %+v\n", c.Type, c.Command)
	}
	// Output:
	// handled
	// duplicate
	// reservation.make-reservation {OrderID:o-1 Seats:2}
}
