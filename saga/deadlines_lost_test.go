package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// failingStore fails the next append to one stream, once.
type failingStore struct {
	*memory.Store
	fail string
}

func (s *failingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == s.fail {
		s.fail = ""
		return eventstore.AppendResult{}, errors.New("connection lost")
	}
	return s.Store.Append(ctx, stream, expected, events...)
}

// Found by the saga simulation (internal/testrig/sim): FireDue takes every due
// deadline out of the index, and when one fails to fire it puts back that
// one only: the others never fire until the process restarts.
func TestAFailedFiringLosesNoOtherDueDeadline(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{Store: memory.New()}
	clock := sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	r, err := saga.NewRunner(saleType(t, testRegistry(t)), store, nil, saga.RunnerOptions{Clock: clock, Logger: testLogger(t)})
	require.NoError(t, err)
	for _, id := range []string{"1", "2"} {
		_, err := r.Deliver(ctx, saga.Delivery{Source: "order-" + id, Event: OrderPlaced{OrderID: id}})
		require.NoError(t, err)
		clock.Advance(time.Second) // instance 1's deadline is due first
	}
	clock.Advance(15 * time.Minute)
	store.fail = "saga:sale-1"
	_, err = r.FireDue(ctx)
	require.Error(t, err, "firing instance 1's deadline fails once")
	fired, err := r.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, fired, "both deadlines fire at the next call")
	for _, id := range []string{"1", "2"} {
		x, err := r.Explain(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"placed", "due1"}, x.State.Seen, "instance %s", id)
	}
}
