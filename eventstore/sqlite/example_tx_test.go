package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// A read model in the store's file moves with its checkpoint, in one
// transaction of the store's writer; an event appended in it commits with
// them.
func ExampleStore_InTx() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	err = store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE order_totals (customer TEXT PRIMARY KEY, total INTEGER NOT NULL) STRICT`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// What a projection's batch does: its effect, an event it emits, and
	// its checkpoint, all or nothing.
	err = store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO order_totals VALUES ('ada', 1250)`); err != nil {
			return err
		}
		_, err := store.AppendTx(ctx, tx, "customer-ada", eventstore.Any,
			eventstore.EventData{Type: "customer.big-spender", SchemaVersion: 1, Data: []byte(`{}`)})
		if err != nil {
			return err
		}
		return store.SaveCheckpointTx(ctx, tx, "order-totals", eventstore.Position{}, eventstore.Position{Major: 7}, 0)
	})
	if err != nil {
		log.Fatal(err)
	}

	cp, err := store.Checkpoint(ctx, "order-totals")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("checkpoint:", cp.Position)
	for e, err := range store.ReadStream(ctx, "customer-ada", eventstore.Forward(0)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("event:", e.Type)
	}
	// Output:
	// checkpoint: 7:0
	// event: customer.big-spender
}
