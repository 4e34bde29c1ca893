package memory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/internal/testrig/counters"
)

func newStore(t testing.TB) eventstore.Store {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs every suite: the store's, the command bus's, the
// sagas' and the projections', whose read model is a counter per key in
// the store's key/value read model.
func TestConformance(t *testing.T) {
	storetest.Run(t, newStore, storetest.Options{
		ReadModel: storetest.TxReadModel(counters.AddMemory, counter),
	})
}

// counter reads the counters' read model of a store that newStore made.
func counter(t testing.TB, s eventstore.Store, key string) int64 {
	return counters.Memory(t, s.(*memory.Store), key)
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, newStore)
}

// A position with a Minor part (another store's, or a hand-made one) sorts
// after {Major, 0} and before {Major+1, 0}: reading after it starts at the
// next event.
func TestReadAfterPositionWithMinor(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	for range 3 {
		_, err := s.Append(ctx, "s-1", eventstore.Any, eventstore.EventData{Type: "x", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	var got []eventstore.Position
	for e, err := range s.ReadAll(ctx, eventstore.Position{Major: 1, Minor: 7}, eventstore.Filter{}) {
		require.NoError(t, err)
		got = append(got, e.Position)
	}
	assert.Equal(t, []eventstore.Position{{Major: 2}, {Major: 3}}, got)
}

// TestCommandResultOnClosedStore adds to the conformance suite what only
// the memory store can be asked without a server: a closed store refuses.
func TestCommandResultOnClosedStore(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	_, err := s.Append(ctx, "c-1", eventstore.NoStream, eventstore.EventData{ID: uuid.New(), Type: "x", Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: "a"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, _, err = s.CommandResult(ctx, "c-1", "a")
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}
