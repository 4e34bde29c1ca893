package codec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/upcast"
)

// The model of version 1 of the service: the Order aggregate handles
// payments, and placing an order records its seats.
type (
	v1OrderPlaced struct {
		OrderID  string    `json:"order_id"`
		Customer string    `json:"customer"`
		Seats    []string  `json:"seats"`
		PlacedAt time.Time `json:"placed_at"`
	}
	v1PaymentAccepted struct {
		OrderID   string `json:"order_id"`
		Amount    string `json:"amount"` // "12.50 EUR"
		Reference string `json:"reference"`
	}
)

// The model of version 2: payments belong to the Finance aggregate, with
// the amount split into cents and currency, and seats are requested by an
// event of their own.
type (
	OrderPlacedV2 struct {
		OrderID  string    `json:"order_id"`
		Customer string    `json:"customer"`
		PlacedAt time.Time `json:"placed_at"`
	}
	SeatsRequested struct {
		OrderID string   `json:"order_id"`
		Seats   []string `json:"seats"`
	}
	PaymentReceived struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
		Reference   string `json:"reference"`
	}
	OrderShipped struct {
		OrderID string `json:"order_id"`
		Carrier string `json:"carrier"`
	}
)

func v1Registry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[v1OrderPlaced](reg, "order.placed", 1))
	require.NoError(t, codec.Register[v1PaymentAccepted](reg, "order.payment_accepted", 1))
	require.NoError(t, codec.Register[OrderShipped](reg, "order.shipped", 1))
	require.NoError(t, reg.Validate())
	return reg
}

// v2Registry is the registry of version 2 of the service, with the
// upcasters that read version 1's events.
func v2Registry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	registerV2(t, reg)
	require.NoError(t, reg.Validate())
	return reg
}

// registerV2 registers version 2's types and the upcasters that read
// version 1's events, leaving reg open for more.
func registerV2(t testing.TB, reg *codec.Registry) {
	require.NoError(t, codec.Register[OrderPlacedV2](reg, "order.placed", 2))
	require.NoError(t, codec.Register[SeatsRequested](reg, "order.seats_requested", 1))
	require.NoError(t, codec.Register[PaymentReceived](reg, "finance.payment_received", 2))
	require.NoError(t, codec.Register[OrderShipped](reg, "order.shipped", 1))
	require.NoError(t, reg.Upcast(
		upcast.Split("order.placed", 1, splitOrderPlaced).Into(
			upcast.Key{Type: "order.placed", Version: 2},
			upcast.Key{Type: "order.seats_requested", Version: 1}),
		upcast.Rename("order.payment_accepted", 1, "finance.payment_received", 1),
		upcast.TransformJSON("finance.payment_received", 1, splitAmount),
	))
}

// splitOrderPlaced moves the seats of a v1 order.placed into an
// order.seats_requested event.
func splitOrderPlaced(r upcast.Raw) ([]upcast.Raw, error) {
	f, err := upcast.JSONFields(r.Data)
	if err != nil {
		return nil, err
	}
	seats, err := json.Marshal(map[string]json.RawMessage{"order_id": f["order_id"], "seats": f["seats"]})
	if err != nil {
		return nil, err
	}
	delete(f, "seats")
	placed, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return []upcast.Raw{
		{Type: "order.placed", Version: 2, Data: placed},
		{Type: "order.seats_requested", Version: 1, Data: seats},
	}, nil
}

// splitAmount turns "12.50 EUR" into amount_cents 1250 and currency "EUR".
func splitAmount(f map[string]json.RawMessage) error {
	var amount string
	if err := json.Unmarshal(f["amount"], &amount); err != nil {
		return fmt.Errorf("amount: %w", err)
	}
	number, currency, ok := strings.Cut(amount, " ")
	if !ok {
		return fmt.Errorf("amount %q: want \"<number> <currency>\"", amount)
	}
	units, cents, _ := strings.Cut(number, ".")
	cents = (cents + "00")[:2]
	n, err := strconv.ParseInt(units+cents, 10, 64)
	if err != nil {
		return fmt.Errorf("amount %q: %w", amount, err)
	}
	delete(f, "amount")
	f["amount_cents"], _ = json.Marshal(n)
	f["currency"], _ = json.Marshal(currency)
	return nil
}

func TestModelChangeReadsOldStreamAsNewModel(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	placedAt := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)

	// Another stream first, so that global positions differ from versions.
	_, err := store.Append(ctx, "other-1", eventstore.NoStream,
		eventstore.EventData{Type: "other.thing", SchemaVersion: 1, Data: []byte(`{}`)})
	require.NoError(t, err)

	// Version 1 of the service writes the order stream.
	old := v1Registry(t)
	events, err := old.EncodeAll(
		v1OrderPlaced{OrderID: "o-1", Customer: "ada", Seats: []string{"A1", "A2"}, PlacedAt: placedAt},
		v1PaymentAccepted{OrderID: "o-1", Amount: "12.5 EUR", Reference: "pay-9"},
	)
	require.NoError(t, err)
	events[1].Metadata = eventstore.Metadata{CorrelationID: "checkout-7"}
	_, err = store.Append(ctx, "order-o-1", eventstore.NoStream, events...)
	require.NoError(t, err)

	// Version 2 reads it.
	reg := v2Registry(t)
	var got []codec.Decoded
	for d, err := range reg.DecodeAll(store.ReadStream(ctx, "order-o-1", eventstore.ReadOptions{})) {
		require.NoError(t, err)
		got = append(got, d)
	}
	require.Len(t, got, 3)

	assert.Equal(t, OrderPlacedV2{OrderID: "o-1", Customer: "ada", PlacedAt: placedAt}, got[0].Value)
	assert.Equal(t, SeatsRequested{OrderID: "o-1", Seats: []string{"A1", "A2"}}, got[1].Value)
	assert.Equal(t, PaymentReceived{OrderID: "o-1", AmountCents: 1250, Currency: "EUR", Reference: "pay-9"}, got[2].Value)

	// Parts of the split carry the stored event's place.
	type place struct {
		Version      uint64
		Position     eventstore.Position
		Index, Count int
		Type         string
		Schema       uint32
	}
	var places []place
	for _, d := range got {
		places = append(places, place{d.Event.Version, d.Event.Position, d.Index, d.Count, d.Event.Type, d.Event.SchemaVersion})
	}
	assert.Equal(t, []place{
		{0, eventstore.Position{Major: 2}, 0, 2, "order.placed", 2},
		{0, eventstore.Position{Major: 2}, 1, 2, "order.seats_requested", 1},
		{1, eventstore.Position{Major: 3}, 0, 1, "finance.payment_received", 2},
	}, places)
	assert.Equal(t, got[0].Event.ID, got[1].Event.ID, "parts share the stored event's ID")
	assert.NotEqual(t, got[0].PartID(), got[1].PartID(), "but not their part IDs")
	assert.False(t, got[0].Last())
	assert.True(t, got[1].Last())
	assert.Equal(t, "checkout-7", got[2].Event.Metadata.CorrelationID, "metadata survives rename and transform")

	// The last decoded event's version is the expected version for the
	// next append, as it refers to stored events.
	next, err := reg.Encode(OrderShipped{OrderID: "o-1", Carrier: "post"})
	require.NoError(t, err)
	_, err = store.Append(ctx, "order-o-1", eventstore.Exact(got[len(got)-1].Event.Version), next)
	require.NoError(t, err)

	// A subscriber of the new finance type finds the event stored under its
	// old name, once the filter asks for the source types.
	filter := eventstore.Filter{Types: reg.SourceTypes("finance.payment_received")}
	assert.Equal(t, []string{"finance.payment_received", "order.payment_accepted"}, filter.Types)
	var payments []any
	for d, err := range reg.DecodeAll(store.ReadAll(ctx, eventstore.Start, filter)) {
		require.NoError(t, err)
		payments = append(payments, d.Value)
	}
	assert.Equal(t, []any{got[2].Value}, payments)

	// Stored events are never rewritten.
	for e, err := range store.ReadStream(ctx, "order-o-1", eventstore.ReadOptions{}) {
		require.NoError(t, err)
		if e.Version < 2 {
			assert.Equal(t, events[e.Version].Type, e.Type)
			assert.Equal(t, events[e.Version].SchemaVersion, e.SchemaVersion)
			assert.Equal(t, events[e.Version].Data, e.Data)
		}
	}
}
