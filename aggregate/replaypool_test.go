package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Loads reuse the repository's replay loop bodies: none may carry anything
// into the next, under contention. Aggregates restored from a snapshot (whose
// replay skips the snapshot's own event), replayed from the first event,
// missing, and failing on an undecodable event are loaded by many goroutines
// at once, each answer checked.
func TestLoadsCarryNothingIntoTheNext(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 4), aggregate.RepositoryOptions{})
	require.NoError(t, err)

	// good-k holds k events of Added{N: 1}, saved one at a time, so that
	// those of 4 or more have snapshots; bad-k has k good events, then one
	// that cannot be decoded.
	const kinds = 12
	for k := 1; k <= kinds; k++ {
		inst, err := repo.Load(ctx, fmt.Sprint("good-", k))
		require.NoError(t, err)
		for range k {
			_, err := repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{})
			require.NoError(t, err)
		}
		stream := fmt.Sprint("tally-bad-", k)
		for range k {
			_, err := store.Append(ctx, stream, eventstore.Any, eventstore.EventData{Type: "tally.added", SchemaVersion: 1, Data: []byte(`{"n":1}`)})
			require.NoError(t, err)
		}
		_, err = store.Append(ctx, stream, eventstore.Exact(uint64(k-1)), eventstore.EventData{Type: "tally.added", SchemaVersion: 1, Data: []byte(`{"n":`)})
		require.NoError(t, err)
	}

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := (g+i)%kinds + 1
				switch i % 3 {
				case 0:
					inst, err := repo.Load(ctx, fmt.Sprint("good-", k))
					if assert.NoError(t, err) {
						assert.Equal(t, k, inst.State.Total, "good-%d", k)
						assert.Equal(t, uint64(k-1), inst.Version, "good-%d", k)
					}
				case 1:
					_, err := repo.Load(ctx, fmt.Sprint("bad-", k))
					var de *codec.DecodeError
					if assert.True(t, errors.As(err, &de), "bad-%d: %v", k, err) {
						assert.Equal(t, uint64(k), de.Version, "bad-%d", k)
					}
				default:
					inst, err := repo.Load(ctx, fmt.Sprint("none-", g, "-", i))
					if assert.NoError(t, err) {
						assert.False(t, inst.Exists)
						assert.Zero(t, inst.State.Total)
					}
				}
			}
		}()
	}
	wg.Wait()
}
