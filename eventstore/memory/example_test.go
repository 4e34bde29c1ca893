package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// The memory store stands in for SQLite or PostgreSQL in tests and
// prototypes: one store keeps the events, what consumers keep beside them
// and the aggregates' snapshots. All of it is gone when the process ends.
func Example() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()

	for i := range 3 {
		e := eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{}`)}
		if _, err := store.Append(ctx, fmt.Sprint("order-", i), eventstore.NoStream, e); err != nil {
			fmt.Println(err)
			return
		}
	}
	head, _ := store.Head(ctx)

	// Two instances of one service share its consumers' leases: one runs
	// the projection, the other waits.
	lease, ok, _ := store.AcquireLease(ctx, "order-count", "instance-a", time.Minute)
	_, taken, _ := store.AcquireLease(ctx, "order-count", "instance-b", time.Minute)
	fmt.Println("a holds it:", ok, "b holds it:", taken)

	// What a transactional projection does with it: the read model and the
	// checkpoint change together, under the holder's fence.
	err := store.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		tx.Put("orders", []byte("3"))
		return store.SaveCheckpointTx(ctx, tx, "order-count", eventstore.Start, head, lease.Fence)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := store.Value("orders")
	cp, _ := store.Checkpoint(ctx, "order-count")
	fmt.Println("orders:", string(v), "checkpoint:", cp.Position)
	// Output:
	// a holds it: true b holds it: false
	// orders: 3 checkpoint: 3:0
}
