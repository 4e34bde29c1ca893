package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Two stores on one file have a writer each, as two processes do: of their
// racing acquirers one wins each round, and fences never repeat, releases
// included.
func TestLeasesAcrossWritersOfOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	seen := map[storekit.Fence]bool{}
	for round := range 10 {
		var mu sync.Mutex
		var won []storekit.Lease
		var wg sync.WaitGroup
		for i, s := range stores {
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, ok, err := s.AcquireLease(ctx, "proj", string(rune('A'+2*i+g)), time.Minute)
					assert.NoError(t, err)
					if ok {
						mu.Lock()
						won = append(won, l)
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		require.Len(t, won, 1, "round %d", round)
		assert.False(t, seen[won[0].Fence], "fence %d handed out twice", won[0].Fence)
		seen[won[0].Fence] = true
		require.NoError(t, stores[round%2].ReleaseLease(ctx, won[0]))
	}
}
