package projection_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/projection"
)

type shipped struct {
	N int `json:"n"`
}

// TestCairnsOwnRecordsReachNoHandlerAndAreNeverDeadLetters runs unfiltered
// consumers, plain and transactional, with and without a typed handler,
// over an aggregate stream that holds a recorded rejection and a stream
// of another of Cairn's own records between user events. No user codec
// can decode those: were they decoded, they would be dead letters. They
// must reach no handler, park nothing, and the checkpoint must pass them.
func TestCairnsOwnRecordsReachNoHandlerAndAreNeverDeadLetters(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[shipped](reg, "order.shipped", 1))
	one, err := reg.Encode(shipped{N: 1})
	require.NoError(t, err)
	two, err := reg.Encode(shipped{N: 2})
	require.NoError(t, err)
	_, err = store.Append(trusted.Writer(ctx), "order-1", eventstore.NoStream,
		one,
		eventstore.EventData{Type: busrepo.RejectionType, SchemaVersion: busrepo.RejectionSchemaVersion,
			Data: []byte(`{"reason":"sold out","command":"x.Reserve"}`), Metadata: eventstore.Metadata{CommandID: "c1"}},
		two)
	require.NoError(t, err)
	_, err = store.Append(trusted.Writer(ctx), "saga:sale-1", eventstore.NoStream, eventstore.EventData{Type: codec.ReservedPrefix + "saga.step", SchemaVersion: 1, Data: []byte(`{}`)})
	require.NoError(t, err)
	last, err := store.Append(ctx, "order-2", eventstore.NoStream, one)
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []any
	record := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, v)
	}
	all := func(_ context.Context, d codec.Decoded) error { record(d.Value); return nil }
	typed := projection.Typed(func(_ context.Context, v shipped, _ codec.Decoded) error { record(v); return nil })
	tx := func(_ context.Context, _ *memory.Tx, d codec.Decoded) error { record(d.Value); return nil }
	for name, newConsumer := range map[string]func(consumers *memory.Store) (*projection.Consumer, error){
		"Plain": func(c *memory.Store) (*projection.Consumer, error) {
			return projection.New("plain", store, reg, c, all, projection.Options{DeadLetters: c, Logger: discard()})
		},
		"Typed": func(c *memory.Store) (*projection.Consumer, error) {
			return projection.New("typed", store, reg, c, typed, projection.Options{DeadLetters: c, Logger: discard()})
		},
		"Tx": func(c *memory.Store) (*projection.Consumer, error) {
			return projection.NewTx[*memory.Tx]("tx", store, reg, c, tx, projection.Options{DeadLetters: c, Logger: discard()})
		},
	} {
		t.Run(name, func(t *testing.T) {
			seen = nil
			consumers := memory.New()
			c, err := newConsumer(consumers)
			require.NoError(t, err)
			require.NoError(t, c.CatchUp(ctx))
			assert.Equal(t, []any{shipped{N: 1}, shipped{N: 2}, shipped{N: 1}}, seen, "the user's events, and nothing else")
			n, err := consumers.CountDeadLetters(ctx, c.Name())
			require.NoError(t, err)
			assert.Zero(t, n, "nothing parked")
			cp, err := consumers.Checkpoint(ctx, c.Name())
			require.NoError(t, err)
			assert.Equal(t, last.Position, cp.Position, "the checkpoint passed every event")
		})
	}
}
