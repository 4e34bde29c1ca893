// Package soak judges the series that Cairn's soak test samples over a long
// run (soak_test.go runs it; `make soak` at full size): whether a
// process's heap and goroutine count stay flat, and whether a consumer's
// lag stays bounded once it has caught up after a restart.
//
// The judgements are plain functions of the samples, so that a test can
// feed them synthetic series and show that they fail a leak and pass a
// flat run (judge_test.go).
package soak

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Sample is one reading of a series, taken At its time since the run
// began.
type Sample struct {
	At    time.Duration
	Value float64
}

// ErrTooFewSamples is returned for a series too short to judge: a verdict
// on three readings would be noise.
var ErrTooFewSamples = errors.New("soak: too few samples to judge")

// MinSamples is the fewest samples [Flat] judges: two per third.
const MinSamples = 6

// Flatness compares the start of a series with its end.
type Flatness struct {
	// First and Last are the medians of the first and the last third of
	// the samples: medians, so that one reading taken in a burst (a
	// catch-up, a GC that had not run yet) moves neither.
	First, Last float64
	// Min and Max are the extremes of the whole series.
	Min, Max float64
	// Samples is how many readings were judged.
	Samples int
}

// Ratio is Last over First (1 for a series of zeros).
func (f Flatness) Ratio() float64 {
	if f.First == 0 {
		if f.Last == 0 {
			return 1
		}
		return f.Last // as if the series began at 1
	}
	return f.Last / f.First
}

// Rise is Last minus First.
func (f Flatness) Rise() float64 { return f.Last - f.First }

// Flat measures a series, in time order, that should not grow: the caller
// leaves out the warm-up it does not judge. It fails with ErrTooFewSamples
// below [MinSamples].
func Flat(series []Sample) (Flatness, error) {
	if len(series) < MinSamples {
		return Flatness{Samples: len(series)}, fmt.Errorf("%w: %d, at least %d needed", ErrTooFewSamples, len(series), MinSamples)
	}
	third := len(series) / 3
	f := Flatness{
		First:   median(series[:third]),
		Last:    median(series[len(series)-third:]),
		Min:     series[0].Value,
		Max:     series[0].Value,
		Samples: len(series),
	}
	for _, s := range series {
		f.Min, f.Max = min(f.Min, s.Value), max(f.Max, s.Value)
	}
	return f, nil
}

// GrowthError says a series grew beyond its bound.
type GrowthError struct {
	// Series names what was measured.
	Series string
	// Flatness is what was found; Bound the limit it broke, a ratio for
	// RatioBound and an absolute rise otherwise.
	Flatness
	Bound      float64
	RatioBound bool
}

func (e *GrowthError) Error() string {
	if e.RatioBound {
		return fmt.Sprintf("soak: %s grew from %.4g to %.4g (x%.2f, bound x%.2f) over %d samples",
			e.Series, e.First, e.Last, e.Ratio(), e.Bound, e.Samples)
	}
	return fmt.Sprintf("soak: %s rose from %.4g to %.4g (+%.4g, bound +%.4g) over %d samples",
		e.Series, e.First, e.Last, e.Rise(), e.Bound, e.Samples)
}

// WithinRatio judges a series flat when the median of its last third is at
// most maxRatio times that of its first: for a heap, whose size varies
// with the work in flight. Otherwise the error is a [*GrowthError].
func WithinRatio(name string, series []Sample, maxRatio float64) (Flatness, error) {
	f, err := Flat(series)
	if err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	if f.Ratio() > maxRatio {
		return f, &GrowthError{Series: name, Flatness: f, Bound: maxRatio, RatioBound: true}
	}
	return f, nil
}

// WithinRise judges a series flat when the median of its last third is at
// most maxRise above that of its first: for a count, like goroutines, that
// should come back to the same level. Otherwise the error is a
// [*GrowthError].
func WithinRise(name string, series []Sample, maxRise float64) (Flatness, error) {
	f, err := Flat(series)
	if err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	if f.Rise() > maxRise {
		return f, &GrowthError{Series: name, Flatness: f, Bound: maxRise}
	}
	return f, nil
}

// Lag sums up a consumer's lag, in events, over a run.
type Lag struct {
	// Median and Max are over every sample, catch-ups included.
	Median, Max float64
	// SteadyMax is the largest sample taken at least the catch-up time
	// after the latest restart, and SteadyAt when it was taken; Steady
	// counts those samples.
	SteadyMax float64
	SteadyAt  time.Duration
	Steady    int
	// CaughtUp is, for each restart, how long after it the first sample at
	// or below the bound came; a restart followed by none before the next
	// one (or the end) counts the whole time it had.
	CaughtUp []time.Duration
}

// CaughtUpMax is the longest of CaughtUp.
func (l Lag) CaughtUpMax() time.Duration {
	var m time.Duration
	for _, d := range l.CaughtUp {
		m = max(m, d)
	}
	return m
}

// LagError says a consumer's lag broke its bound after it had had the
// time to catch up.
type LagError struct {
	Lag
	Bound   float64
	CatchUp time.Duration
}

func (e *LagError) Error() string {
	return fmt.Sprintf("soak: lag of %.0f events at %s, %s or more after the latest restart (bound %.0f)",
		e.SteadyMax, e.SteadyAt.Round(time.Second), e.CatchUp, e.Bound)
}

// Bounded judges a consumer's lag, sampled in time order: every sample
// taken at least catchUp after the latest of restarts (the times the
// consumer's process started, in order) must be at most bound. The
// samples inside a catch-up only count towards Median and Max: a process
// that was dead has a backlog to read. A lag above bound after catchUp is
// a [*LagError]; too few samples in all, ErrTooFewSamples.
func Bounded(samples []Sample, restarts []time.Duration, catchUp time.Duration, bound float64) (Lag, error) {
	if len(samples) < MinSamples {
		return Lag{}, fmt.Errorf("lag: %w: %d, at least %d needed", ErrTooFewSamples, len(samples), MinSamples)
	}
	l := Lag{Median: median(samples), CaughtUp: make([]time.Duration, 0, len(restarts))}
	next := 0 // restarts[:next] began at or before the sample
	var latest time.Duration
	started, caught := false, true
	for _, s := range samples {
		for next < len(restarts) && restarts[next] <= s.At {
			if !caught {
				l.CaughtUp = append(l.CaughtUp, restarts[next]-latest)
			}
			latest, started, caught = restarts[next], true, false
			next++
		}
		if !caught && s.Value <= bound {
			l.CaughtUp, caught = append(l.CaughtUp, s.At-latest), true
		}
		l.Max = max(l.Max, s.Value)
		if started && s.At-latest < catchUp {
			continue
		}
		l.Steady++
		if s.Value > l.SteadyMax || l.Steady == 1 {
			l.SteadyMax, l.SteadyAt = s.Value, s.At
		}
	}
	if !caught {
		l.CaughtUp = append(l.CaughtUp, samples[len(samples)-1].At-latest)
	}
	if l.SteadyMax > bound {
		return l, &LagError{Lag: l, Bound: bound, CatchUp: catchUp}
	}
	return l, nil
}

func median(s []Sample) float64 {
	if len(s) == 0 {
		return 0
	}
	vs := make([]float64, len(s))
	for i, x := range s {
		vs[i] = x.Value
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
