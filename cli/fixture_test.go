package cli_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/trusted"
)

// fixtureEvent is one event of the fixture every golden test starts from.
type fixtureEvent struct {
	stream, typ, data string
	md                eventstore.Metadata
}

// fixture is the same store content on every backend: three categories of
// streams, one saga instance's stream, metadata to find events by.
var fixture = []fixtureEvent{
	{"order-1", "order.placed", `{"order_id":"1","seats":2}`, eventstore.Metadata{CorrelationID: "flow-1", CommandID: "cmd-place-1"}},
	{"order-2", "order.placed", `{"order_id":"2","seats":1}`, eventstore.Metadata{CorrelationID: "flow-2", CommandID: "cmd-place-2"}},
	{"seats-1", "seats.reserved", `{"order_id":"1","seats":2}`, eventstore.Metadata{CorrelationID: "flow-1", CausationID: "cmd-place-1", CommandID: "cmd-reserve-1"}},
	{"saga:sale-1", "sale.step", `{"step":1}`, eventstore.Metadata{CorrelationID: "flow-1"}},
	{"order-1", "order.paid", `{"order_id":"1","amount":"40.00"}`, eventstore.Metadata{CorrelationID: "flow-1", CommandID: "cmd-pay-1"}},
	{"order-1", "order.confirmed", `{"order_id":"1"}`, eventstore.Metadata{CorrelationID: "flow-1", CommandID: "cmd-confirm-1"}},
	{"order-2", "order.rejected", `{"order_id":"2","reason":"no payment in time"}`, eventstore.Metadata{CorrelationID: "flow-2", CommandID: "cmd-reject-2", Extra: map[string]string{"tenant": "north"}}},
	{"seats-2", "seats.reserved", "\x00\x01 not json", eventstore.Metadata{CorrelationID: "flow-2"}},
}

// buildFixture appends the fixture to store, one event per append, and
// returns the stored events in order.
func buildFixture(t *testing.T, store eventstore.Store) []eventstore.Event {
	t.Helper()
	ctx := trusted.Writer(context.Background()) // the saga stream is Cairn's own
	for i, e := range fixture {
		_, err := store.Append(ctx, e.stream, eventstore.Any, eventstore.EventData{
			ID: eventID(i), Type: e.typ, Data: []byte(e.data), Metadata: e.md,
		})
		require.NoError(t, err, "fixture event %d", i)
	}
	var stored []eventstore.Event
	for e, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		stored = append(stored, e)
	}
	require.Len(t, stored, len(fixture), fmt.Sprintf("the fixture's events in %T", store))
	return stored
}
