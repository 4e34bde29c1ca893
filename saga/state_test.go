package saga_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/upcast"
)

// SaleV2 is a later model of the test saga's state: Seen became History,
// and it counts what it saw.
type SaleV2 struct {
	OrderID string   `json:"order_id"`
	History []string `json:"history"`
	Count   int      `json:"count"`
}

func TestStateRecordedByOlderCodeIsUpcast(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "v1 note"})

	// The new code: state v2, with an upcaster from the v1 layout.
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[SaleV2](reg, "sale.state", 2))
	require.NoError(t, codec.Register[Note](reg, "note", 1))
	// It still sends the commands v1 recorded: Explain lists the unsent ones.
	require.NoError(t, codec.Register[MakeReservation](reg, "make.reservation", 1))
	require.NoError(t, reg.Upcast(upcast.TransformJSON("sale.state", 1, func(fields map[string]json.RawMessage) error {
		var seen []string
		if err := json.Unmarshal(fields["seen"], &seen); err != nil {
			return err
		}
		fields["history"] = fields["seen"]
		delete(fields, "seen")
		delete(fields, "fails")
		fields["count"], _ = json.Marshal(len(seen))
		return nil
	})))
	v2, err := saga.New[SaleV2]("sale", reg, saga.Options[SaleV2]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(v2, saga.Event[SaleV2, Note]{
		Instance: func(e Note, _ eventstore.Metadata) string { return e.OrderID },
		Handle: func(_ context.Context, s *SaleV2, e Note, _ *saga.Output) error {
			s.History = append(s.History, e.Text)
			s.Count++
			return nil
		}}))
	r, err := saga.NewRunner(v2, f.store, nil, saga.RunnerOptions{})
	require.NoError(t, err)

	x, err := r.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, &SaleV2{OrderID: "1", History: []string{"placed", "v1 note"}, Count: 2}, x.State, "the v1 state read through the upcaster")
	assert.Equal(t, uint64(0), x.Watermarks["notes"], "and the watermarks carry over")

	out, err := r.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: 1, Event: Note{OrderID: "1", Text: "v2 note"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out)
	out, err = r.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: 0, Event: Note{OrderID: "1", Text: "v1 note"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Duplicate, out, "what v1 handled, v2 does not handle again")
	x, err = r.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, &SaleV2{OrderID: "1", History: []string{"placed", "v1 note", "v2 note"}, Count: 3}, x.State)
}
