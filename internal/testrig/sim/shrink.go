package sim

import (
	"context"
	"slices"
)

// DefaultShrinkRuns bounds the runs Shrink makes.
const DefaultShrinkRuns = 300

// Shrink looks for a smaller run that fails as failing does: with fewer
// orders (delta debugging over the orders placed), fewer fault kinds (each
// one switched off while the run still fails), and fewer faults (delta
// debugging over the fault opportunities that faulted). It makes at most
// runs runs (zero means DefaultShrinkRuns) and returns the smallest failing
// run it found, with its trace.
func Shrink(ctx context.Context, failing *Result, runs int) (*Result, error) {
	if runs <= 0 {
		runs = DefaultShrinkRuns
	}
	best := failing
	fails := func(cfg Config) (bool, error) {
		if runs <= 0 {
			return false, nil
		}
		runs--
		cfg.Trace = false
		res, err := Run(ctx, cfg)
		if err != nil || res.Valid() {
			return false, err
		}
		best = res
		return true, nil
	}

	orders := best.Config.Only
	if len(orders) == 0 {
		for i := range best.Config.orders() {
			orders = append(orders, i)
		}
	}
	if _, err := ddmin(orders, func(only []int) (bool, error) {
		cfg := best.Config
		cfg.Only = slices.Clone(only)
		return fails(cfg)
	}); err != nil {
		return nil, err
	}

	for k := range numKinds {
		if best.Config.Disabled.Has(k) {
			continue
		}
		cfg := best.Config
		cfg.Disabled = cfg.Disabled.With(k)
		if _, err := fails(cfg); err != nil {
			return nil, err
		}
	}

	limit := func(allowed []int) (bool, error) {
		cfg := best.Config
		cfg.LimitFaults, cfg.Allowed = true, slices.Clone(allowed)
		return fails(cfg)
	}
	if none, err := limit(nil); err != nil {
		return nil, err
	} else if !none {
		if _, err := ddmin(slices.Clone(best.Faulted), limit); err != nil {
			return nil, err
		}
	}

	cfg := best.Config
	cfg.Trace = true
	return Run(ctx, cfg)
}

// ddmin is Zeller's delta debugging: it returns a subset of items on
// which fails still holds, removing chunks of halving size while it can.
func ddmin(items []int, fails func([]int) (bool, error)) ([]int, error) {
	n := 2
	for len(items) >= 2 {
		size := (len(items) + n - 1) / n
		reduced := false
		for start := 0; start < len(items) && !reduced; start += size {
			end := min(start+size, len(items))
			for _, candidate := range [][]int{items[start:end], slices.Concat(items[:start], items[end:])} {
				ok, err := fails(candidate)
				if err != nil {
					return nil, err
				}
				if ok {
					if len(candidate) == end-start {
						n = 2 // a chunk alone fails: start over on it
					} else {
						n = max(n-1, 2)
					}
					items, reduced = slices.Clone(candidate), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(items) {
				break
			}
			n = min(2*n, len(items))
		}
	}
	return items, nil
}
