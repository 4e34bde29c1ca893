package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	// The zero Options are the durable defaults.
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	_, err = store.Append(ctx, "order-42", eventstore.NoStream,
		eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"total":"12.50"}`)},
		eventstore.EventData{Type: "order.paid", SchemaVersion: 1, Data: []byte(`{}`)},
	)
	if err != nil {
		log.Fatal(err)
	}
	// A second append that expects the stream to be new is refused.
	_, err = store.Append(ctx, "order-42", eventstore.NoStream,
		eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{}`)})
	fmt.Println(err)

	for e, err := range store.ReadStream(ctx, "order-42", eventstore.Forward(0)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Version, e.Type, e.Position)
	}
	// Output:
	// append to stream "order-42": wrong expected version: expected no stream, actual 1
	// 0 order.placed 1:0
	// 1 order.paid 2:0
}

func ExampleStore_Subscribe() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	go func() {
		for _, typ := range []string{"order.placed", "order.shipped"} {
			if _, err := store.Append(ctx, "order-7", eventstore.Any,
				eventstore.EventData{Type: typ, Data: []byte(`{}`)}); err != nil {
				log.Fatal(err)
			}
		}
	}()
	// Only shipments, in commit order; live events wake the subscriber on
	// commit.
	filter := eventstore.Filter{Types: []string{"order.shipped"}}
	for e, err := range store.Subscribe(ctx, eventstore.Start, filter) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.StreamID, e.Type)
		break
	}
	// Output:
	// order-7 order.shipped
}
