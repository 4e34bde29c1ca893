package saga_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// TestConsumerFiltersCountWhatIsLeft: after a catch-up, each consumer's
// checkpoint stands at the last event its filter selected, so that
// unrelated events stored later are after every checkpoint but none is
// left to read through the consumer's filter; the filters a tool reads
// from the store without a runner are the runner's own.
func TestConsumerFiltersCountWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, reservation.Register(reg))
	bus := command.New(store, reg, command.Options{})
	require.NoError(t, reservation.Route(bus))
	sale, err := reservation.NewSale(reg)
	require.NoError(t, err)
	r, err := saga.NewRunner(sale, store, bus, saga.RunnerOptions{})
	require.NoError(t, err)

	placed, err := reg.Encode(domain.OrderPlaced{OrderID: "o1", Customer: "c", Seats: 1, AmountCents: 100})
	require.NoError(t, err)
	_, err = store.Append(ctx, "order-o1", eventstore.NoStream, placed)
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx))
	for range 3 {
		_, err = store.Append(ctx, "elsewhere-1", eventstore.Any, eventstore.EventData{Type: "unrelated", Data: []byte(`{}`)})
		require.NoError(t, err)
	}

	filters := r.ConsumerFilters()
	require.ElementsMatch(t, []string{"saga:sale", "saga:sale:outbox"}, keys(filters))
	assert.Equal(t, []string{"cairn.saga.step"}, filters["saga:sale:outbox"].Types)
	assert.Equal(t, []string{"saga:sale-"}, filters["saga:sale:outbox"].StreamPrefixes)
	assert.Contains(t, filters["saga:sale"].Types, "order.placed")
	for name, f := range filters {
		cp, err := store.Checkpoint(ctx, name)
		require.NoError(t, err)
		require.False(t, cp.Position.IsZero(), "%s ran", name)
		assert.Zero(t, count(t, store, cp.Position, f), "%s: nothing of its own left", name)
		// Also after it: the other consumer's events (step records,
		// the subscription record, the commands' events).
		assert.GreaterOrEqual(t, count(t, store, cp.Position, eventstore.Filter{}), 3, "%s: the unrelated events are after it", name)
	}

	stored, err := saga.StoredConsumerFilters(ctx, store, []string{"saga:sale", "saga:sale:outbox", "orders-view", "saga:sale:member-0/2"})
	require.NoError(t, err)
	assert.Equal(t, filters, stored, "the subscription record names what the events consumer reads; other names are left out")
}

// TestConsumerFiltersNames: a runner of several segments names each
// segment's pair, not "saga:<type>", which only keeps dead letters then;
// one with external events runs no events consumer. From the store, an
// events consumer of a type without a subscription record has no known
// filter, and "saga:<type>" none when the store lists segmented names.
func TestConsumerFiltersNames(t *testing.T) {
	two, err := saleRunner(t, saga.RunnerOptions{Segments: 2})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"saga:sale#0/2", "saga:sale#0/2:outbox", "saga:sale#1/2", "saga:sale#1/2:outbox"}, keys(two.ConsumerFilters()))
	external, err := saleRunner(t, saga.RunnerOptions{ExternalEvents: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"saga:sale:outbox"}, keys(external.ConsumerFilters()))

	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	stored, err := saga.StoredConsumerFilters(context.Background(), store, []string{"saga:sale", "saga:sale#0/2", "saga:sale#1/2:outbox"})
	require.NoError(t, err)
	assert.Equal(t, []string{"saga:sale#1/2:outbox"}, keys(stored))
}

func keys(m map[string]eventstore.Filter) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func count(t *testing.T, store eventstore.Store, after eventstore.Position, f eventstore.Filter) int {
	t.Helper()
	n := 0
	for _, err := range store.ReadAll(context.Background(), after, f) {
		require.NoError(t, err)
		n++
	}
	return n
}
