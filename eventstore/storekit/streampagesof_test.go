package storekit_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// decorated decorates a store: it has the embedded store's StreamPages,
// but its own ReadStream (which would check, filter or count reads).
type decorated struct{ *memory.Store }

func (d decorated) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return d.Store.ReadStream(ctx, stream, opts)
}

// selfish is a store of a struct type that names itself the owner: one
// that cannot be compared (it holds a slice), or holds in an interface
// field a value that cannot (comparing two of them panics).
type selfish struct {
	*memory.Store
	tags   []string
	labels any
}

func (s selfish) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	read, size, _ := s.Store.StreamPages()
	return read, size, s
}

// hollow embeds a nil memory store for its method set and reads streams
// its own way, as test doubles do: its StreamPages panics.
type hollow struct{ *memory.Store }

func (hollow) ReadStream(context.Context, string, eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return func(func(eventstore.Event, error) bool) {}
}

// ownerless hands out a reader without saying whose it is.
type ownerless struct{ *memory.Store }

func (o ownerless) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	read, size, _ := o.Store.StreamPages()
	return read, size, nil
}

// TestStreamPagesOfOnlyTheStoresOwn: a store's page reader is handed out
// for the store itself, and never for a store that embeds it: reading
// with it would bypass that store's own ReadStream. Nor does StreamPagesOf
// panic on a store whose StreamPages does, or that cannot be compared.
func TestStreamPagesOfOnlyTheStoresOwn(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })

	read, _, ok := storekit.StreamPagesOf(mem)
	require.True(t, ok, "the memory store's own reader")
	require.NotNil(t, read)

	for name, store := range map[string]eventstore.Store{
		"a decorator with its own ReadStream":        decorated{mem},
		"a store that cannot be compared":            selfish{Store: mem, tags: []string{"x"}},
		"a store holding a value that cannot be":     selfish{Store: mem, labels: []string{"x"}},
		"a store that names no owner":                ownerless{Store: mem},
		"a nil memory store":                         (*memory.Store)(nil),
		"a nil SQLite store":                         (*sqlite.Store)(nil),
		"a decorator of a nil store, as doubles are": hollow{},
	} {
		read, size, ok := storekit.StreamPagesOf(store)
		assert.False(t, ok, name)
		assert.Nil(t, read, name)
		assert.Zero(t, size, name)
	}
}
