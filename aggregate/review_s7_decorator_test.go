package aggregate_test

import (
	"context"
	"iter"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// s7HideSQLite embeds *sqlite.Store (by pointer) with a pointer-receiver
// ReadStream; s7HideMem embeds *memory.Store with a value receiver; s7Deep
// embeds a decorator that embeds the store.
type (
	s7HideSQLite struct {
		*sqlite.Store
		reads atomic.Int64
	}
	s7HideMem struct {
		*memory.Store
		reads *atomic.Int64
	}
	s7Deep struct{ s7HideMem }
	// s7Forward forwards everything, StreamPages included, to a store in
	// a field: it hands out the inner store's reader, naming it the owner.
	s7Forward struct {
		eventstore.Store
		paged storekit.PagedStreams
		reads *atomic.Int64
	}
)

func s7Hide(seq iter.Seq2[eventstore.Event, error]) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		for e, err := range seq {
			if err == nil && e.Type == "hidden" {
				continue
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

func (s *s7HideSQLite) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	s.reads.Add(1)
	return s7Hide(s.Store.ReadStream(ctx, stream, opts))
}

func (s s7HideMem) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	s.reads.Add(1)
	return s7Hide(s.Store.ReadStream(ctx, stream, opts))
}

func (s s7Forward) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	s.reads.Add(1)
	return s7Hide(s.Store.ReadStream(ctx, stream, opts))
}

func (s s7Forward) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	return s.paged.StreamPages()
}

// TestReviewS7DecoratorsAreReadThroughTheirReadStream: decorators that
// embed a store (by value or pointer receiver, one level or two), or
// forward its StreamPages, are read through their own ReadStream: the
// hidden events are never applied (an applier for them does not exist,
// so applying one fails the load).
func TestReviewS7DecoratorsAreReadThroughTheirReadStream(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "d.db"), sqlite.Options{NoPolling: true, Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close(); _ = lite.Close() })
	var memReads, fwdReads atomic.Int64
	liteDec := &s7HideSQLite{Store: lite}
	for name, c := range map[string]struct {
		store eventstore.Store
		under eventstore.Store
		reads func() int64
	}{
		"sqlite, pointer receiver": {liteDec, lite, liteDec.reads.Load},
		"memory, value receiver":   {s7HideMem{Store: mem, reads: &memReads}, mem, memReads.Load},
		"memory, two levels":       {s7Deep{s7HideMem{Store: mem, reads: &memReads}}, mem, memReads.Load},
		"forwarded StreamPages":    {s7Forward{Store: mem, paged: mem, reads: &fwdReads}, mem, fwdReads.Load},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, ok := storekit.StreamPagesOf(c.store)
			assert.False(t, ok)
			repo, err := aggregate.NewRepository(c.store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
			require.NoError(t, err)
			id := "d-" + name
			var batch []eventstore.EventData
			for i := range 1100 {
				batch = append(batch, eventstore.EventData{Type: "tally.added", SchemaVersion: 1, Data: []byte(`{"n":1}`)})
				if i%3 == 0 {
					batch = append(batch, eventstore.EventData{Type: "hidden", SchemaVersion: 1, Data: []byte(`{}`)})
				}
			}
			_, err = c.under.Append(ctx, "tally-"+id, eventstore.NoStream, batch...)
			require.NoError(t, err)
			before := c.reads()
			inst, err := repo.Load(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, 1100, inst.State.Total)
			assert.Equal(t, before+1, c.reads())
		})
	}
}
