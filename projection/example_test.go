package projection_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/projection"
)

type OrderPlaced struct {
	OrderID string `json:"order_id"`
	Total   int    `json:"total"`
}

// A transactional projection: the revenue read model and the checkpoint
// change in one transaction, so each order counts exactly once.
func Example() {
	ctx := context.Background()
	store := memory.New() // events, and checkpoints, dead letters, leases, read model
	defer store.Close()

	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[OrderPlaced](reg, "order.placed", 1)
	for i, total := range []int{30, 12, 58} {
		e, _ := reg.Encode(OrderPlaced{OrderID: fmt.Sprint("o-", i), Total: total})
		_, _ = store.Append(ctx, fmt.Sprint("order-", i), eventstore.NoStream, e)
	}

	revenue := projection.TypedTx(func(ctx context.Context, tx *memory.Tx, o OrderPlaced, _ codec.Decoded) error {
		sum := 0
		if v, ok := tx.Get("revenue"); ok {
			sum, _ = strconv.Atoi(string(v))
		}
		tx.Put("revenue", []byte(strconv.Itoa(sum+o.Total)))
		return nil
	})
	c, err := projection.NewTx("revenue", store, reg, store, revenue, projection.Options{
		Filter: eventstore.Filter{Types: reg.SourceTypes("order.placed")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Run(ctx) would go on following live events; CatchUp stops at the end.
	if err := c.CatchUp(ctx); err != nil {
		fmt.Println(err)
		return
	}
	v, _ := store.Value("revenue")
	cp, _ := store.Checkpoint(ctx, "revenue")
	fmt.Println("revenue:", string(v), "checkpoint:", cp.Position)
	// Output: revenue: 100 checkpoint: 3:0
}
