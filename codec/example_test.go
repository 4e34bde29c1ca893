package codec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/upcast"
)

// Version 2 of a shop's model. Version 1 recorded the seats inside
// order.placed and let the Order aggregate accept payments, with the amount
// as text ("12.50 EUR"); version 2 requests seats with an event of their
// own and moves payments to a Finance aggregate.
type (
	ShopOrderPlaced struct {
		OrderID  string `json:"order_id"`
		Customer string `json:"customer"`
	}
	ShopSeatsRequested struct {
		OrderID string   `json:"order_id"`
		Seats   []string `json:"seats"`
	}
	ShopPaymentReceived struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
	}
)

func ExampleRegister() {
	reg := codec.NewRegistry(codec.Options{})
	// Names and versions are explicit: renaming the Go type changes nothing stored.
	if err := codec.Register[ShopOrderPlaced](reg, "order.placed", 2); err != nil {
		panic(err)
	}
	if err := reg.Validate(); err != nil {
		panic(err)
	}

	data, _ := reg.Encode(ShopOrderPlaced{OrderID: "o-1", Customer: "ada"})
	fmt.Println(data.Type, data.SchemaVersion, string(data.Data))

	stored := eventstore.Event{EventData: data, StreamID: "order-o-1", Version: 0}
	decoded, _ := reg.Decode(stored)
	switch e := decoded[0].Value.(type) {
	case ShopOrderPlaced:
		fmt.Println("placed by", e.Customer)
	}
	// Output:
	// order.placed 2 {"order_id":"o-1","customer":"ada"}
	// placed by ada
}

// The model of a shop changes: version 2 of the code reads a stream that
// version 1 wrote, without knowing version 1's Go types.
func ExampleRegistry_Upcast() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()

	// What version 1 of the service stored.
	_, err := store.Append(ctx, "order-o-1", eventstore.NoStream,
		eventstore.EventData{Type: "order.placed", SchemaVersion: 1,
			Data: []byte(`{"order_id":"o-1","customer":"ada","seats":["A1","A2"]}`)},
		eventstore.EventData{Type: "order.payment_accepted", SchemaVersion: 1,
			Data: []byte(`{"order_id":"o-1","amount":"12.50 EUR"}`)},
	)
	if err != nil {
		panic(err)
	}

	// Version 2: the current types, and the steps from the old ones.
	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[ShopOrderPlaced](reg, "order.placed", 2)
	_ = codec.Register[ShopSeatsRequested](reg, "order.seats_requested", 1)
	_ = codec.Register[ShopPaymentReceived](reg, "finance.payment_received", 2)
	_ = reg.Upcast(
		// One coarse event becomes two fine ones.
		upcast.Split("order.placed", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			var v1 struct {
				OrderID  string   `json:"order_id"`
				Customer string   `json:"customer"`
				Seats    []string `json:"seats"`
			}
			if err := json.Unmarshal(r.Data, &v1); err != nil {
				return nil, err
			}
			placed, _ := json.Marshal(ShopOrderPlaced{OrderID: v1.OrderID, Customer: v1.Customer})
			seats, _ := json.Marshal(ShopSeatsRequested{OrderID: v1.OrderID, Seats: v1.Seats})
			return []upcast.Raw{
				{Type: "order.placed", Version: 2, Data: placed},
				{Type: "order.seats_requested", Version: 1, Data: seats},
			}, nil
		}).Into(upcast.Key{Type: "order.placed", Version: 2}, upcast.Key{Type: "order.seats_requested", Version: 1}),
		// The event moves to the Finance aggregate under a new name...
		upcast.Rename("order.payment_accepted", 1, "finance.payment_received", 1),
		// ...and its amount is split into two fields.
		upcast.TransformJSON("finance.payment_received", 1, func(f map[string]json.RawMessage) error {
			var amount string
			if err := json.Unmarshal(f["amount"], &amount); err != nil {
				return err
			}
			number, currency, _ := strings.Cut(amount, " ")
			cents, err := strconv.ParseInt(strings.Replace(number, ".", "", 1), 10, 64)
			if err != nil {
				return err
			}
			delete(f, "amount")
			f["amount_cents"], _ = json.Marshal(cents)
			f["currency"], _ = json.Marshal(currency)
			return nil
		}),
	)
	if err := reg.Validate(); err != nil { // gaps, cycles, dead ends: caught here
		panic(err)
	}

	for d, err := range reg.DecodeAll(store.ReadStream(ctx, "order-o-1", eventstore.ReadOptions{})) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("version %d, part %d of %d: %s v%d %+v\n",
			d.Event.Version, d.Index+1, d.Count, d.Event.Type, d.Event.SchemaVersion, d.Value)
	}
	// A subscriber to the new name must also ask for the old one.
	fmt.Println(reg.SourceTypes("finance.payment_received"))

	// Output:
	// version 0, part 1 of 2: order.placed v2 {OrderID:o-1 Customer:ada}
	// version 0, part 2 of 2: order.seats_requested v1 {OrderID:o-1 Seats:[A1 A2]}
	// version 1, part 1 of 1: finance.payment_received v2 {OrderID:o-1 AmountCents:1250 Currency:EUR}
	// [finance.payment_received order.payment_accepted]
}

func ExampleDecodeSnapshot() {
	type CartState struct {
		Items int `json:"items"`
	}
	reg := codec.NewRegistry(codec.Options{})
	_ = codec.Register[CartState](reg, "cart.state", 2)
	_ = reg.Upcast(upcast.Drop("cart.state", 1)) // v1 state cannot be brought forward

	current, _ := reg.EncodeSnapshot("cart-c-1", 9, CartState{Items: 3})
	state, err := codec.DecodeSnapshot[CartState](reg, current)
	fmt.Println(state.Items, err)

	old := storekit.Snapshot{Stream: "cart-c-1", Version: 4, Type: "cart.state", SchemaVersion: 1, Data: []byte(`{"n":3}`)}
	_, err = codec.DecodeSnapshot[CartState](reg, old)
	if errors.Is(err, codec.ErrNoUpcastPath) {
		fmt.Println("discard the snapshot and replay the stream")
	}
	// Output:
	// 3 <nil>
	// discard the snapshot and replay the stream
}
