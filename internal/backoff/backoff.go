// Package backoff computes retry delays: exponential growth, a cap, and
// jitter so that many retrying workers spread out instead of colliding
// again. The command bus (version conflicts) and the consumers (failing
// handlers) share it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cairn-es/cairn/retry"
)

// Policy says how long to wait before each retry. The zero value retries
// after 10ms, doubling up to 1s, with full jitter.
type Policy struct {
	// Initial is the delay before the first retry; zero means 10ms.
	Initial time.Duration
	// Max caps the delay; zero means 1s.
	Max time.Duration
	// Multiplier grows the delay after each retry; zero means 2.
	Multiplier float64
	// NoJitter waits the exact delay. By default the wait is drawn at random
	// from [delay/2, delay], which keeps the schedule's shape and spreads
	// retries apart.
	NoJitter bool
}

// Delay returns how long to wait before retry number attempt (1 for the
// first retry).
func (p Policy) Delay(attempt int) time.Duration {
	initial, limit, mult := p.Initial, p.Max, p.Multiplier
	if initial <= 0 {
		initial = 10 * time.Millisecond
	}
	if limit <= 0 {
		limit = time.Second
	}
	if limit < initial {
		limit = initial
	}
	if mult < 1 {
		mult = 2
	}
	d := float64(initial)
	for i := 1; i < attempt && d < float64(limit); i++ {
		d *= mult
	}
	delay := time.Duration(min(d, float64(limit)))
	if p.NoJitter || delay < 2 {
		return delay
	}
	half := delay / 2
	return half + rand.N(delay-half+1)
}

// Of returns the waits of p, the retry schedule of an option that users
// set: the bus, the projection consumers and the saga runners each hold
// one.
func Of(p retry.Policy) Policy {
	return Policy{Initial: p.Initial, Max: p.Max, Multiplier: p.Multiplier}
}

// Wait sleeps for d or until ctx ends, and returns ctx.Err() in that case.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
