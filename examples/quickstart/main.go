// Command quickstart is Cairn's first tour: it appends events to a store,
// reads a stream back, follows the store with a subscription, and shows how
// the store absorbs a retried append and rejects a stale one.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	store := memory.New()
	defer store.Close()

	stream := "order-" + uuid.NewString()[:8]
	fmt.Printf("stream %s\n", stream)

	// A subscriber follows every order stream: catch-up first, then live.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan eventstore.Event)
	go func() {
		defer close(seen)
		for e, err := range store.Subscribe(ctx, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{eventstore.Category("order")}}) {
			if err != nil {
				return
			}
			seen <- e
		}
	}()

	placed := event("order.placed", `{"customer":"c-7","lines":2}`)
	paid := event("order.paid", `{"amount":"129.90"}`)
	r, err := store.Append(ctx, stream, eventstore.NoStream, placed, paid)
	if err != nil {
		return err
	}
	fmt.Printf("appended versions %d..%d, last at position %s\n", r.FirstVersion, r.LastVersion, r.Position)

	// A publisher that got no acknowledgement retries: nothing is duplicated.
	r, err = store.Append(ctx, stream, eventstore.NoStream, placed, paid)
	if err != nil {
		return err
	}
	fmt.Printf("retried the same append: duplicate=%v, still versions %d..%d\n", r.Duplicate, r.FirstVersion, r.LastVersion)

	// A writer that decided on stale state is refused.
	_, err = store.Append(ctx, stream, eventstore.Exact(0), event("order.cancelled", `{}`))
	var conflict *eventstore.WrongVersionError
	if errors.As(err, &conflict) {
		fmt.Printf("stale append refused: expected %s, actual %s\n", conflict.Expected, conflict.Actual)
	}

	if _, err := store.Append(ctx, stream, eventstore.Exact(1), event("order.shipped", `{"carrier":"dhl"}`)); err != nil {
		return err
	}

	fmt.Println("reading the stream:")
	for e, err := range store.ReadStream(ctx, stream, eventstore.Forward(0)) {
		if err != nil {
			return err
		}
		fmt.Printf("  v%d %-14s %s\n", e.Version, e.Type, e.Data)
	}

	fmt.Println("the subscriber saw:")
	for range 3 {
		select {
		case e := <-seen:
			fmt.Printf("  %s %s v%d %s\n", e.Position, e.StreamID, e.Version, e.Type)
		case <-time.After(5 * time.Second):
			fmt.Fprintln(os.Stderr, "the subscriber saw nothing within 5s")
			return errors.New("subscription stalled")
		}
	}
	return nil
}

func event(typ, data string) eventstore.EventData {
	return eventstore.EventData{ID: eventstore.NewEventID(), Type: typ, SchemaVersion: 1, Data: []byte(data)}
}
