package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// The memory stores stand in for SQLite or PostgreSQL in tests and
// prototypes: New keeps events, NewConsumers what consumers keep beside
// them, NewSnapshotStore the aggregates' snapshots. All of it is gone when
// the process ends.
func Example() {
	ctx := context.Background()
	events := memory.New()
	defer events.Close()
	consumers := memory.NewConsumers()

	for i := range 3 {
		e := eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{}`)}
		if _, err := events.Append(ctx, fmt.Sprint("order-", i), eventstore.NoStream, e); err != nil {
			fmt.Println(err)
			return
		}
	}
	head, _ := events.Head(ctx)

	// Two instances of one service share its consumers' leases: one runs
	// the projection, the other waits.
	lease, ok, _ := consumers.AcquireLease(ctx, "order-count", "instance-a", time.Minute)
	_, taken, _ := consumers.AcquireLease(ctx, "order-count", "instance-b", time.Minute)
	fmt.Println("a holds it:", ok, "b holds it:", taken)

	// What a transactional projection does with it: the read model and the
	// checkpoint change together, under the holder's fence.
	err := consumers.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		tx.Put("orders", []byte("3"))
		return consumers.SaveCheckpointTx(ctx, tx, "order-count", eventstore.Start, head, lease.Fence)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := consumers.Value("orders")
	cp, _ := consumers.Checkpoint(ctx, "order-count")
	fmt.Println("orders:", string(v), "checkpoint:", cp.Position)
	// Output:
	// a holds it: true b holds it: false
	// orders: 3 checkpoint: 3:0
}
