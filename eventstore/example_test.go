package eventstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Appending with an expected version, absorbing a retried append, and
// reading the stream back.
func Example() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()

	placed := eventstore.EventData{ID: eventstore.NewEventID(), Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"lines":2}`)}
	if _, err := store.Append(ctx, "order-42", eventstore.NoStream, placed); err != nil {
		fmt.Println(err)
		return
	}

	// The publisher never got its acknowledgement and sends the same event again.
	r, _ := store.Append(ctx, "order-42", eventstore.NoStream, placed)
	fmt.Println("duplicate:", r.Duplicate)

	// A writer that decided on stale state is refused, and told why.
	shipped := eventstore.EventData{Type: "order.shipped", SchemaVersion: 1, Data: []byte(`{}`)}
	_, err := store.Append(ctx, "order-42", eventstore.NoStream, shipped)
	fmt.Println(errors.Is(err, eventstore.ErrWrongVersion), err)

	for e, err := range store.ReadStream(ctx, "order-42", eventstore.Forward(0)) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e.Version, e.Type, string(e.Data))
	}
	// Output:
	// duplicate: true
	// true append to stream "order-42": wrong expected version: expected no stream, actual 0
	// 0 order.placed {"lines":2}
}

// Following a category of streams: first what is stored, then live events.
func ExampleStore_subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	defer store.Close()

	data := func(typ string) eventstore.EventData {
		return eventstore.EventData{Type: typ, SchemaVersion: 1, Data: []byte(`{}`)}
	}
	store.Append(ctx, "order-1", eventstore.NoStream, data("order.placed"))
	store.Append(ctx, "invoice-1", eventstore.NoStream, data("invoice.sent"))

	orders := eventstore.Filter{StreamPrefixes: []string{eventstore.Category("order")}}
	seen := 0
	for e, err := range store.Subscribe(ctx, eventstore.Start, orders) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(e.StreamID, e.Version, e.Type)
		if seen++; seen == 1 {
			// Caught up: this one arrives live.
			store.Append(ctx, "order-1", eventstore.Exact(0), data("order.paid"))
		} else {
			break
		}
	}
	// Output:
	// order-1 0 order.placed
	// order-1 1 order.paid
}
