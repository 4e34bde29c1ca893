package postgres_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
)

func Example() {
	ctx := context.Background()
	// databaseURL is your database, such as "postgres://app@db.internal/app".
	store, err := postgres.Open(ctx, databaseURL("example_orders"), postgres.Options{Schema: "example_orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	r, err := store.Append(ctx, "order-42", eventstore.NoStream,
		eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"total":"129.90"}`)},
		eventstore.EventData{Type: "order.paid", SchemaVersion: 1, Data: []byte(`{}`)},
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended versions", r.FirstVersion, "to", r.LastVersion)

	// Another writer that loaded the stream at version 0 loses the race.
	_, err = store.Append(ctx, "order-42", eventstore.Exact(0),
		eventstore.EventData{Type: "order.cancelled", SchemaVersion: 1, Data: []byte(`{}`)})
	fmt.Println(err)

	// A subscriber sees every committed event in global order, catch-up then live.
	sub, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	seen := 0
	for e, err := range store.Subscribe(sub, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{eventstore.Category("order")}}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.StreamID, e.Version, e.Type)
		if seen++; seen == 2 {
			break
		}
	}
	// Output:
	// appended versions 0 to 1
	// append to stream "order-42": wrong expected version: expected 0, actual 1
	// order-42 0 order.placed
	// order-42 1 order.paid
}

func ExampleStore_AppendTx() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, databaseURL("example_outbox"), postgres.Options{Schema: "example_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Pool().Exec(ctx, `CREATE TABLE example_outbox.order_totals (id text PRIMARY KEY, total numeric)`); err != nil {
		log.Fatal(err)
	}

	// The events and the read-model row commit together, or not at all.
	tx, err := store.Pool().Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := store.AppendTx(ctx, tx, "order-7", eventstore.NoStream,
		eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"total":"18.50"}`)}); err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO example_outbox.order_totals VALUES ('7', 18.50)`); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	store.Notify() // wake subscribers now rather than at their next poll

	for e, err := range store.ReadStream(ctx, "order-7", eventstore.ReadOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Version, e.Type, string(e.Data))
	}
	// Output:
	// 0 order.placed {"total":"18.50"}
}

func ExampleStore_Lag() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, databaseURL("example_lag"), postgres.Options{Schema: "example_lag"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Alert when committed events wait too long for an older transaction.
	lag, err := store.Lag(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if lag.Delay > time.Minute && lag.Holder != nil {
		log.Printf("subscribers held back %s by backend %d (%s for %s)", lag.Delay, lag.Holder.PID, lag.Holder.State, lag.Holder.Age)
	}
	fmt.Println("events waiting:", lag.Pending)
	// Output:
	// events waiting: 0
}
