package storekit_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// readCounter decorates a store, counting its stream reads: it has the
// embedded store's StreamPages, but its own ReadStream.
type readCounter struct {
	*memory.Store
	reads *int
}

func (c readCounter) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	*c.reads++
	return c.Store.ReadStream(ctx, stream, opts)
}

// selfish is a store of a type that cannot be compared (it holds a
// slice), which says it is itself.
type selfish struct {
	*memory.Store
	tags []string
}

func (s selfish) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	read, size, _ := s.Store.StreamPages()
	return read, size, s
}

// ownerless hands out a reader without saying whose it is.
type ownerless struct{ *memory.Store }

func (o ownerless) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	read, size, _ := o.Store.StreamPages()
	return read, size, nil
}

// TestStreamPagesOfOnlyTheStoresOwn: a store's page reader is handed out
// for the store itself, and never for a store that embeds it: reading
// with it would bypass that store's own ReadStream.
func TestStreamPagesOfOnlyTheStoresOwn(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })

	read, _, ok := storekit.StreamPagesOf(mem)
	require.True(t, ok, "the memory store's own reader")
	require.NotNil(t, read)

	reads := 0
	for name, store := range map[string]eventstore.Store{
		"a decorator with its own ReadStream": readCounter{Store: mem, reads: &reads},
		"a store that cannot be compared":     selfish{Store: mem, tags: []string{"x"}},
		"a store that names no owner":         ownerless{Store: mem},
	} {
		read, size, ok := storekit.StreamPagesOf(store)
		assert.False(t, ok, name)
		assert.Nil(t, read, name)
		assert.Zero(t, size, name)
	}
}
