package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// TestLeaseContention has holders acquire, renew and release one short
// lease at random, and checks what holders rely on: a fence is handed to
// one holder only, whatever the interleaving, and no holder is refused the
// lease it holds itself.
func TestLeaseContention(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	const holders, rounds = 6, 40
	var mu sync.Mutex
	owner := map[storekit.Fence]string{}
	var wg sync.WaitGroup
	for h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprint("holder-", h)
			rng := rand.New(rand.NewPCG(uint64(h), 1))
			for range rounds {
				l, ok, err := s.AcquireLease(ctx, "hot", me, time.Duration(1+rng.IntN(20))*time.Millisecond)
				if !assert.NoError(t, err) {
					return
				}
				if !ok {
					assert.NotEqual(t, me, l.Holder, "refused the lease that it holds itself")
					continue
				}
				mu.Lock()
				if prev, seen := owner[l.Fence]; seen {
					assert.Equal(t, me, prev, "fence %d handed to two holders", l.Fence)
				}
				owner[l.Fence] = me
				mu.Unlock()
				switch rng.IntN(3) {
				case 0:
					err = s.ReleaseLease(ctx, l)
				case 1:
					var r storekit.Lease
					r, err = s.RenewLease(ctx, l, time.Millisecond)
					if err == nil {
						assert.Equal(t, l.Fence, r.Fence)
					}
				}
				if err != nil {
					assert.ErrorIs(t, err, eventstore.ErrLeaseLost)
				}
			}
		}()
	}
	wg.Wait()
	require.NotEmpty(t, owner)
	// Every change of hands added to the fence.
	final, _, err := s.AcquireLease(ctx, "hot", "observer", time.Hour)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(owner), int(final.Fence))
	t.Logf("%d changes of hands", len(owner))
}
