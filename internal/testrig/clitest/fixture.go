package clitest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/trusted"
)

// EventID makes the fixtures' event IDs the same on every run and store.
func EventID(n int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(n >> 8), byte(n)})
}

// fixtureEvent is one event of the fixture every golden test starts from.
type fixtureEvent struct {
	stream, typ, data string
	md                eventstore.Metadata
}

// fixture is the same store content on every store: three categories of
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

// BuildFixture appends the fixture to store, one event per append, and
// returns the stored events in order.
func BuildFixture(t testing.TB, store eventstore.Store) []eventstore.Event {
	t.Helper()
	ctx := trusted.Writer(context.Background()) // the saga stream is Cairn's own
	for i, e := range fixture {
		_, err := store.Append(ctx, e.stream, eventstore.Any, eventstore.EventData{
			ID: EventID(i), Type: e.typ, Data: []byte(e.data), Metadata: e.md,
		})
		require.NoError(t, err, "fixture event %d", i)
	}
	var stored []eventstore.Event
	for e, err := range store.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		stored = append(stored, e)
	}
	require.Len(t, stored, len(fixture), "the fixture's events in %T", store)
	return stored
}

// The consumer fixture's dead letter IDs, fixed so that command lines can
// name them.
const (
	SeatsDL1 = "01JC0000000000000000000001" // seats-view, seats-1
	SeatsDL2 = "01JC0000000000000000000002" // seats-view, seats-2 (data not JSON)
	SagaDL   = "01JC0000000000000000000003" // saga:sale, saga:sale-1
	Missing  = "01JC0000000000000000000099" // no consumer has it
)

// FixtureFailure is when the consumer fixture's dead letters failed.
var FixtureFailure = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ConsumerStores are the state stores every Cairn store is.
type ConsumerStores interface {
	storekit.CheckpointStore
	storekit.LeaseStore
	storekit.DeadLetterStore
}

// BuildConsumers adds consumers' state to the fixture (stored is what
// BuildFixture returned), through the store's own APIs, so that every
// consumer command has something to show:
//
//   - orders-view: checkpoint at event 5 (2 pending), lease held live by
//     host-1/orders-view for an hour;
//   - seats-view: caught up, its lease released (lapsed), 2 dead letters;
//   - stalled: checkpoint at event 1 (6 pending), lease released: nobody
//     runs it while events wait;
//   - saga:sale: a saga runner's consumer, caught up, unleased, 1 dead letter.
func BuildConsumers(t testing.TB, store eventstore.Store, stored []eventstore.Event) {
	t.Helper()
	ctx := context.Background()
	s, ok := store.(ConsumerStores)
	require.True(t, ok, "%T keeps checkpoints, leases and dead letters", store)

	save := func(name string, at eventstore.Position, fence storekit.Fence) {
		require.NoError(t, s.SaveCheckpoint(ctx, name, eventstore.Start, at, fence), name)
	}
	lease := func(name, holder string, release bool) storekit.Fence {
		l, ok, err := s.AcquireLease(ctx, name, holder, time.Hour)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		if release {
			require.NoError(t, s.ReleaseLease(ctx, l), name)
		}
		return l.Fence
	}
	park := func(consumer, id string, e eventstore.Event, msg string) {
		_, err := s.ParkDeadLetter(ctx, eventstore.DeadLetter{
			ID: id, Consumer: consumer, Event: e, Error: msg, Attempts: 3,
			FirstFailure: FixtureFailure, LastFailure: FixtureFailure.Add(time.Minute),
		})
		require.NoError(t, err, consumer)
	}

	save("orders-view", stored[5].Position, lease("orders-view", "host-1/orders-view", false))
	save("seats-view", stored[7].Position, lease("seats-view", "host-2/seats-view", true))
	park("seats-view", SeatsDL1, stored[2], "seats table: constraint violated")
	park("seats-view", SeatsDL2, stored[7], "decoding seats.reserved: invalid character '\\x00'")
	save("stalled", stored[1].Position, lease("stalled", "host-3/stalled", true))
	save("saga:sale", stored[7].Position, 0)
	park("saga:sale", SagaDL, stored[3], "sale: no step for sale.step")
}

// Substitute replaces {P<n>} in args by the position of stored event n,
// so that a case names a position of the store it runs on.
func Substitute(args []string, stored []eventstore.Event) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for n, e := range stored {
			a = strings.ReplaceAll(a, "{P"+strconv.Itoa(n)+"}", e.Position.String())
		}
		out[i] = a
	}
	return out
}
