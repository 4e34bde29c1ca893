// Command orders is Cairn's flagship example: an order service fed by an
// at-least-once queue, consumed by two deployments at once, on the embedded
// SQLite store.
//
// The queue does what real ones do: a publisher sends some messages twice,
// a worker crashes after its command took effect but before it acknowledged
// (so the message comes back), and messages arrive out of order (payment
// before the order exists) and are put back. Two deployments (a blue/green
// swap in progress) each run a command bus with its own cache, and four
// workers alternate between them; a transactional projection keeps totals
// in the same SQLite file. At the end the example checks that every command took effect
// once and the read model counted every event once.
//
// Run it twice: the second run reuses the data folder and adds to it.
//
//	go run ./examples/orders [-data data] [-orders 100]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

func main() {
	dataDir := flag.String("data", "data", "folder for the SQLite file; created when missing, reused when present")
	orders := flag.Int("orders", 100, "new orders to run through the queue")
	flag.Parse()
	if err := run(context.Background(), *dataDir, *orders); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dataDir string, orders int) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dataDir, "orders.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	reg, err := newRegistry()
	if err != nil {
		return err
	}
	// Two deployments (blue and green, mid-swap) consume the same queue,
	// each with its own bus and cache, on one store.
	stats := &busStats{}
	blue, err := newBus(store, reg, stats, quiet)
	if err != nil {
		return err
	}
	green, err := newBus(store, reg, stats, quiet)
	if err != nil {
		return err
	}
	totals, err := newTotals(ctx, store, reg, quiet)
	if err != nil {
		return err
	}
	before, err := totals.read(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("store %s: %d orders from earlier runs\n", path, before.placed)

	// The projection follows the store live while the queue runs.
	live, stopLive := context.WithCancel(ctx)
	projected := make(chan error, 1)
	go func() { projected <- totals.consumer.Run(live) }()

	q := newQueue(orders, 4)
	start := time.Now()
	if err := q.drain(ctx, blue, green); err != nil {
		stopLive()
		return err
	}
	elapsed := time.Since(start)
	stopLive()
	if err := <-projected; err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	// Whatever the live run had not reached yet.
	if err := totals.consumer.CatchUp(ctx); err != nil {
		return fmt.Errorf("projection catch-up: %w", err)
	}

	fmt.Printf("queue: %d commands for %d new orders, delivered %d times to %d workers of two deployments in %s\n",
		q.published, orders, q.deliveries.Load(), q.workers, elapsed.Round(time.Millisecond))
	fmt.Printf("  took effect once:       %5d\n", stats.applied.Load())
	fmt.Printf("  redeliveries absorbed:  %5d  (same message ID: earlier result, nothing appended)\n", stats.duplicates.Load())
	fmt.Printf("  put back, out of order: %5d  (payment or shipping before the order could take it)\n", q.putBack.Load())
	fmt.Printf("  put back, contended:    %5d  (the other deployment kept winning the race for the order)\n", q.contended.Load())
	fmt.Printf("  version conflicts retried: %2d  (both deployments deciding on one order at once)\n", stats.conflicts.Load())

	after, err := totals.read(ctx)
	if err != nil {
		return err
	}
	stored, err := countEvents(ctx, store)
	if err != nil {
		return err
	}
	fmt.Printf("read model (transactional projection in the same file):\n")
	fmt.Printf("  placed %d, paid %d, shipped %d, revenue %d.%02d\n",
		after.placed, after.paid, after.shipped, after.revenueCents/100, after.revenueCents%100)

	newOrders := after.placed - before.placed
	switch {
	case newOrders != orders || after.paid-before.paid != orders || after.shipped-before.shipped != orders:
		return fmt.Errorf("expected %d new orders placed, paid and shipped; the read model says %+v before, %+v after", orders, before, after)
	case stored != after.placed+after.paid+after.shipped:
		return fmt.Errorf("the store holds %d order events but the read model counted %d", stored, after.placed+after.paid+after.shipped)
	case stats.applied.Load() != int64(q.published):
		return fmt.Errorf("%d commands took effect, %d were published", stats.applied.Load(), q.published)
	}
	fmt.Printf("exactly once: %d commands took effect once each; the read model counted each of the %d stored events once\n",
		q.published, stored)
	return nil
}

// newRegistry gives every event a stable name and schema version.
func newRegistry() (*codec.Registry, error) {
	reg := codec.NewRegistry(codec.Options{})
	return reg, errors.Join(
		codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[OrderPaid](reg, "order.paid", 1),
		codec.Register[OrderShipped](reg, "order.shipped", 1),
		reg.Validate(),
	)
}

// countEvents counts the order events in the store.
func countEvents(ctx context.Context, store eventstore.Store) (int, error) {
	n := 0
	for _, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{eventstore.Category("order")}}) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
