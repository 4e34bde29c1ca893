package soak_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/testrig/soak"
)

// series returns n samples two seconds apart, f of each index.
func series(n int, f func(i int) float64) []soak.Sample {
	s := make([]soak.Sample, n)
	for i := range s {
		s[i] = soak.Sample{At: time.Duration(i) * 2 * time.Second, Value: f(i)}
	}
	return s
}

// A heap that wobbles around 12 MB with GC timing, with bursts, is flat;
// one that also keeps 40 KB per sample (an unbounded cache filling at
// 20 KB/s, 6 MB over ten minutes of a 300-sample run) is not.
func TestHeapJudgement(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const mb = 1 << 20
	wobble := func(int) float64 {
		v := 12*mb + (rng.Float64()-0.5)*6*mb
		if rng.IntN(20) == 0 {
			v += 10 * mb // a catch-up burst, once in a while
		}
		return v
	}
	flat, err := soak.WithinRatio("heap", series(300, wobble), 1.5)
	require.NoError(t, err)
	assert.InDelta(t, 1, flat.Ratio(), 0.15)

	leak := func(i int) float64 { return wobble(i) + float64(i)*40*1024 }
	f, err := soak.WithinRatio("heap", series(300, leak), 1.5)
	var grew *soak.GrowthError
	require.ErrorAs(t, err, &grew)
	assert.Equal(t, "heap", grew.Series)
	assert.Greater(t, f.Ratio(), 1.5)
	assert.Contains(t, err.Error(), "heap grew from")
}

// Goroutines that come back to the same level pass; one left behind every
// few seconds (a goroutine per batch that never ends) does not.
func TestGoroutineJudgement(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	steady := func(int) float64 { return float64(20 + rng.IntN(12)) }
	_, err := soak.WithinRise("goroutines", series(300, steady), 10)
	require.NoError(t, err)

	leak := func(i int) float64 { return steady(i) + float64(i/5) }
	_, err = soak.WithinRise("goroutines", series(300, leak), 10)
	var grew *soak.GrowthError
	require.ErrorAs(t, err, &grew)
	assert.False(t, grew.RatioBound)
	assert.Greater(t, grew.Rise(), 10.0)
}

func TestFlatNeedsSamples(t *testing.T) {
	_, err := soak.WithinRatio("heap", series(soak.MinSamples-1, func(int) float64 { return 1 }), 1.5)
	require.ErrorIs(t, err, soak.ErrTooFewSamples)
	_, err = soak.Bounded(series(3, func(int) float64 { return 1 }), nil, time.Second, 10)
	require.ErrorIs(t, err, soak.ErrTooFewSamples)

	zeros, err := soak.Flat(series(9, func(int) float64 { return 0 }))
	require.NoError(t, err)
	assert.Equal(t, 1.0, zeros.Ratio())
}

// lagAfterRestarts is a consumer's lag: a backlog after each restart that
// drains at drain events per sample, on top of a steady level.
func lagAfterRestarts(restarts []time.Duration, steady, backlog, drain float64) func(i int) float64 {
	return func(i int) float64 {
		at := time.Duration(i) * 2 * time.Second
		var since time.Duration = -1
		for _, r := range restarts {
			if r <= at {
				since = at - r
			}
		}
		if since < 0 {
			return steady
		}
		samples := float64(since / (2 * time.Second))
		return steady + math.Max(0, backlog-drain*samples)
	}
}

// A lag that is large right after each restart but drains within the
// catch-up time is bounded; one that drains too slowly, or that grows
// while the consumer runs, is not; and a sample in a catch-up window is
// reported in Max but not judged.
func TestLagJudgement(t *testing.T) {
	restarts := []time.Duration{0, 100 * time.Second, 230 * time.Second, 400 * time.Second}
	drains := lagAfterRestarts(restarts, 50, 5000, 1000)
	lag, err := soak.Bounded(series(300, drains), restarts, 30*time.Second, 400)
	require.NoError(t, err)
	assert.Equal(t, 5050.0, lag.Max)
	assert.Equal(t, 50.0, lag.SteadyMax)
	assert.Equal(t, 50.0, lag.Median)
	assert.Positive(t, lag.Steady)
	// 5000 events drained at 1000 a sample (2 s) are at or below 400 on
	// the sixth sample after each restart.
	assert.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}, lag.CaughtUp)
	assert.Equal(t, 10*time.Second, lag.CaughtUpMax())

	slow := lagAfterRestarts(restarts, 50, 5000, 200) // 50 s to drain
	_, err = soak.Bounded(series(300, slow), restarts, 30*time.Second, 400)
	var over *soak.LagError
	require.ErrorAs(t, err, &over)
	assert.Equal(t, 2050.0, over.SteadyMax, "the backlog left 30 s after a restart")
	assert.Equal(t, 30*time.Second, over.SteadyAt)
	assert.Equal(t, 48*time.Second, over.CaughtUpMax(), "24 samples of 200 bring 5050 to 250")

	growing := func(i int) float64 { return drains(i) + float64(i)*3 }
	_, err = soak.Bounded(series(300, growing), restarts, 30*time.Second, 400)
	require.ErrorAs(t, err, &over)
	assert.Contains(t, err.Error(), "after the latest restart")
}
