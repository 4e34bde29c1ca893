package memory_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventstore.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) eventstore.Store {
		s := memory.New()
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
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
