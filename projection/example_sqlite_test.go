package projection_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
)

type OrderCancelled struct {
	OrderID string `json:"order_id"`
}

// A read model in a table of the SQLite store's own file: each batch of
// events and the consumer's checkpoint commit in one transaction, so every
// event counts once across crashes. The service answers a request from the
// table after waiting for the projection to pass the position of the
// request's own write (read-your-writes).
func Example_sqlite() {
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
	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[OrderPlaced](reg, "order.placed", 1)
	_ = codec.Register[OrderCancelled](reg, "order.cancelled", 1)

	// The table, then one function per event type that changes it.
	err = store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS open_orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var view projection.TxHandlers[*sql.Tx]
	_ = projection.OnTx(&view, func(ctx context.Context, tx *sql.Tx, o OrderPlaced, _ codec.Decoded) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO open_orders (id, total) VALUES (?, ?)`, o.OrderID, o.Total)
		return err
	})
	_ = projection.OnTx(&view, func(ctx context.Context, tx *sql.Tx, o OrderCancelled, _ codec.Decoded) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM open_orders WHERE id = ?`, o.OrderID)
		return err
	})
	filter, err := view.Filter(reg)
	if err != nil {
		log.Fatal(err)
	}
	// The SQLite store is the event store and the consumer's store
	// (checkpoints, dead letters, and the transactions of the read model).
	openOrders, err := projection.NewTx("open-orders", store, reg, store, view.Handle, projection.Options{Filter: filter})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = openOrders.Run(ctx) }() // live, until stop

	// A request: write, wait for the read model to have it, read.
	write := func(stream string, v any) eventstore.Position {
		e, err := reg.Encode(v)
		if err != nil {
			log.Fatal(err)
		}
		res, err := store.Append(ctx, stream, eventstore.Any, e)
		if err != nil {
			log.Fatal(err)
		}
		return res.Position
	}
	write("order-1", OrderPlaced{OrderID: "1", Total: 30})
	write("order-2", OrderPlaced{OrderID: "2", Total: 12})
	last := write("order-1", OrderCancelled{OrderID: "1"})

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := openOrders.WaitFor(wait, last); err != nil {
		log.Fatal(err)
	}
	err = store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, total FROM open_orders ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var total int
			if err := rows.Scan(&id, &total); err != nil {
				return err
			}
			fmt.Println("open:", id, total)
		}
		return rows.Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: open: 2 12
}
