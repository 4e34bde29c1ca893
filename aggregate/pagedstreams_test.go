package aggregate_test

import (
	"context"
	"fmt"
	"iter"
	"sync"
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

// countedReads decorates the memory store, counting its stream reads. It
// has the memory store's page reader (storekit.PagedStreams), by
// embedding, but a ReadStream of its own.
type countedReads struct {
	*memory.Store
	reads *atomic.Int64
}

func (c countedReads) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	c.reads.Add(1)
	return c.Store.ReadStream(ctx, stream, opts)
}

// TestLoadsReadThroughADecoratorsReadStream: a repository reads with the
// store's page reader only when the reader is the store's own; a store
// that embeds another and reads streams its own way (checks, filters,
// counts) is read through its ReadStream, every load of it.
func TestLoadsReadThroughADecoratorsReadStream(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	var reads atomic.Int64
	repo, err := aggregate.NewRepository(countedReads{Store: mem, reads: &reads}, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	require.False(t, inst.Exists)
	_, err = repo.Save(ctx, inst, []any{Added{N: 2}, Added{N: 3}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	again, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, 5, again.State.Total)
	assert.Equal(t, int64(2), reads.Load(), "two loads, two reads of the decorator")
}

// TestLongAggregatesLoadWholeOnEveryPagedStore: aggregates of several
// pages load whole through the store's page reader, their page buffers
// reused by loads of short and missing ones from goroutines at once.
func TestLongAggregatesLoadWholeOnEveryPagedStore(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) eventstore.Store{
		"memory": func(*testing.T) eventstore.Store { return memory.New() },
		"sqlite": func(t *testing.T) eventstore.Store {
			s, err := sqlite.Open(ctx, t.TempDir()+"/paged.db", sqlite.Options{Synchronous: sqlite.SyncNormal})
			require.NoError(t, err)
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			t.Cleanup(func() { _ = store.Close() })
			_, _, paged := storekit.StreamPagesOf(store)
			require.True(t, paged, "the store hands out its page reader")
			repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
			require.NoError(t, err)

			// long-k: 2 pages and k events; short-k: k events.
			const kinds = 4
			for k := 1; k <= kinds; k++ {
				for id, n := range map[string]int{fmt.Sprint("long-", k): 2*storekit.DefaultPageSize + k, fmt.Sprint("short-", k): k} {
					inst, err := repo.New(id)
					require.NoError(t, err)
					events := make([]any, n)
					for i := range events {
						events[i] = Added{N: i + 1}
					}
					_, err = repo.Save(ctx, inst, events, aggregate.SaveOptions{})
					require.NoError(t, err)
				}
			}
			sum := func(n int) int { return n * (n + 1) / 2 }

			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 60 {
						k := (g+i)%kinds + 1
						var id string
						n := 0
						switch i % 3 {
						case 0:
							id, n = fmt.Sprint("long-", k), 2*storekit.DefaultPageSize+k
						case 1:
							id, n = fmt.Sprint("short-", k), k
						default:
							id = fmt.Sprint("none-", g, "-", i)
						}
						inst, err := repo.Load(ctx, id)
						if !assert.NoError(t, err, id) {
							return
						}
						assert.Equal(t, n > 0, inst.Exists, id)
						assert.Equal(t, sum(n), inst.State.Total, id)
						if n > 0 {
							assert.Equal(t, uint64(n-1), inst.Version, id)
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
