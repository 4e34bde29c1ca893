package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDelayGrowsToTheCap(t *testing.T) {
	p := Policy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, NoJitter: true}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, p.Delay(a))
	}
	assert.Equal(t, []time.Duration{10, 20, 40, 80, 100, 100}, divide(got, time.Millisecond))
}

func TestJitterStaysWithinHalfToFull(t *testing.T) {
	p := Policy{Initial: 8 * time.Millisecond, Max: time.Second}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := p.Delay(3) // nominal 32ms
		require.GreaterOrEqual(t, d, 16*time.Millisecond)
		require.LessOrEqual(t, d, 32*time.Millisecond)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 100, "jitter spreads delays apart")
}

func TestZeroPolicyHasDefaults(t *testing.T) {
	var p Policy
	p.NoJitter = true
	assert.Equal(t, 10*time.Millisecond, p.Delay(1))
	assert.Equal(t, time.Second, p.Delay(50))
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, Wait(ctx, time.Hour), context.Canceled)
	assert.NoError(t, Wait(context.Background(), time.Microsecond))
}

func divide(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}
