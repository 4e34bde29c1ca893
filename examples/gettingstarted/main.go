// Command gettingstarted is the service that docs/getting-started.md
// builds, step by step: a shopping cart aggregate on the embedded SQLite
// store, a command bus, and a read model that a transactional projection
// keeps in the same file. Run it with
//
//	go run ./examples/gettingstarted
//
// Every Go snippet of the guide is a piece of this file or of cart.go, and
// a test checks that they stay so.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
)

func main() {
	dir, err := os.MkdirTemp("", "cairn-getting-started")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), filepath.Join(dir, "shop.db"), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// report is what run prints, for the test to check.
type report struct {
	lines     map[string]int // sku -> quantity in cart-1
	status    string
	duplicate bool
	refused   error
}

func run(ctx context.Context, path string, out *os.File) error {
	r, err := shop(ctx, path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cart-1: %v, %s\n", r.lines, r.status)
	fmt.Fprintf(out, "the redelivered command was a duplicate: %v\n", r.duplicate)
	fmt.Fprintf(out, "adding to a checked-out cart: %v\n", r.refused)
	return nil
}

func shop(ctx context.Context, path string) (report, error) {
	var r report
	// Open the store: one SQLite file, created on first use.
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return r, err
	}
	defer store.Close()

	// Register every event and command under a stable name and version.
	reg := codec.NewRegistry(codec.Options{})
	err = errors.Join(
		codec.Register[ItemAdded](reg, "cart.item_added", 1),
		codec.Register[CheckedOut](reg, "cart.checked_out", 1),
		codec.Register[AddItem](reg, "cart.add_item", 1),
		codec.Register[CheckOut](reg, "cart.check_out", 1),
	)
	if err != nil {
		return r, err
	}

	// Bind each command and event type to the cart's method for it, and
	// route each command type to the aggregate type that handles it.
	carts, err := aggregate.NewType[Cart]("cart", aggregate.Options[Cart]{},
		aggregate.Handles((*Cart).Add),
		aggregate.Handles((*Cart).CheckOut),
		aggregate.Applies((*Cart).Added),
		aggregate.Applies((*Cart).CheckedOut),
	)
	if err != nil {
		return r, err
	}
	bus := command.New(store, reg, command.Options{})
	err = errors.Join(
		command.Route[AddItem](bus, carts),
		command.Route[CheckOut](bus, carts),
	)
	if err != nil {
		return r, err
	}

	// The read model: two tables in the store's own file.
	err = store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			CREATE TABLE IF NOT EXISTS cart_lines (cart TEXT, sku TEXT, qty INTEGER NOT NULL, PRIMARY KEY (cart, sku));
			CREATE TABLE IF NOT EXISTS carts (cart TEXT PRIMARY KEY, status TEXT NOT NULL)`)
		return err
	})
	if err != nil {
		return r, err
	}

	// One typed function per event type; each runs in the transaction that
	// also moves the projection's checkpoint.
	var view projection.TxHandlers[*sql.Tx]
	err = errors.Join(
		projection.OnTx(&view, func(ctx context.Context, tx *sql.Tx, e ItemAdded, d codec.Decoded) error {
			cart, _ := carts.ID(d.Event.StreamID)
			_, err := tx.ExecContext(ctx, `INSERT INTO cart_lines VALUES (?, ?, ?)
				ON CONFLICT DO UPDATE SET qty = qty + excluded.qty`, cart, e.SKU, e.Qty)
			if err == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO carts VALUES (?, 'open') ON CONFLICT DO NOTHING`, cart)
			}
			return err
		}),
		projection.OnTx(&view, func(ctx context.Context, tx *sql.Tx, e CheckedOut, d codec.Decoded) error {
			cart, _ := carts.ID(d.Event.StreamID)
			_, err := tx.ExecContext(ctx, `UPDATE carts SET status = 'checked out' WHERE cart = ?`, cart)
			return err
		}),
	)
	if err != nil {
		return r, err
	}
	filter, err := view.Filter(reg)
	if err != nil {
		return r, err
	}
	cartView, err := projection.NewTx("cart-view", store, reg, store, view.Handle, projection.Options{Filter: filter})
	if err != nil {
		return r, err
	}
	ctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- cartView.Run(ctx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			log.Printf("cart-view: %v", err)
		}
	}()

	// Send commands. The ID is the caller's: a queue's message ID, say.
	_, err = bus.Dispatch(ctx, command.Message{ID: "msg-1", Command: AddItem{CartID: "1", SKU: "tea", Qty: 2}})
	if err != nil {
		return r, err
	}
	_, err = bus.Dispatch(ctx, command.Message{ID: "msg-2", Command: AddItem{CartID: "1", SKU: "cups", Qty: 4}})
	if err != nil {
		return r, err
	}
	res, err := bus.Dispatch(ctx, command.Message{ID: "msg-3", Command: CheckOut{CartID: "1"}})
	if err != nil {
		return r, err
	}

	// The queue delivers msg-2 again: the bus returns the first outcome and
	// appends nothing.
	again, err := bus.Dispatch(ctx, command.Message{ID: "msg-2", Command: AddItem{CartID: "1", SKU: "cups", Qty: 4}})
	if err != nil {
		return r, err
	}
	r.duplicate = again.Duplicate

	// A refusal is the aggregate's own error.
	_, r.refused = bus.Dispatch(ctx, command.Message{ID: "msg-4", Command: AddItem{CartID: "1", SKU: "milk", Qty: 1}})
	if !errors.Is(r.refused, ErrCheckedOut) {
		return r, fmt.Errorf("expected ErrCheckedOut, got %v", r.refused)
	}

	// Read your writes: wait until the read model shows the checkout, then
	// query it in a read-only transaction beside the writer.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cartView.WaitFor(wait, res.Position); err != nil {
		return r, err
	}
	r.lines = make(map[string]int)
	err = store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT sku, qty FROM cart_lines WHERE cart = '1'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var sku string
			var qty int
			if err := rows.Scan(&sku, &qty); err != nil {
				return err
			}
			r.lines[sku] = qty
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT status FROM carts WHERE cart = '1'`).Scan(&r.status)
	})
	return r, err
}
