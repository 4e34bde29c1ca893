package soak_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-es/cairn/internal/testrig/soak"
)

// report is what a soak found, judged.
type report struct {
	size
	seed                  uint64
	kills                 int
	placed                placement
	outcome               outcome
	placingEnded, drained time.Duration
	loadBefore            string

	starts []time.Duration
	runner []genSample
	lags   []lagSample
	placer []placerSample

	heapAll, heapLast, goAll, goLast, placerHeap, placerGo soak.Flatness
	rssAll, rssLast, placerRSS                             soak.Flatness
	lag, outboxLag                                         soak.Lag
	lagErrors                                              int
	handled, duplicates, conflicts                         int64
	parked, gaps                                           int

	// failures are the judgements that failed; notes those a smoke-sized
	// run only reports.
	failures, notes []string
}

// judge measures every series and judges what the size says to judge.
func (r *report) judge() {
	check := func(err error) {
		switch {
		case err == nil:
		case r.Judge:
			r.failures = append(r.failures, err.Error())
		default:
			r.notes = append(r.notes, err.Error())
		}
	}
	var heapAll, heapLast, goAll, goLast, placerHeap, placerGo, lags, outboxLags []soak.Sample
	var rssAll, rssLast, placerRSS []soak.Sample
	lastGen := len(r.starts)
	for _, s := range r.runner {
		if s.At > r.placingEnded || s.HeapLive == 0 {
			// The drain is not steady load; a process that has not
			// collected yet has no live heap to report.
			continue
		}
		if s.At >= r.Warmup && s.Age >= r.CatchUp {
			heapAll = append(heapAll, soak.Sample{At: s.At, Value: float64(s.HeapLive)})
			goAll = append(goAll, soak.Sample{At: s.At, Value: float64(s.Goroutines)})
			rssAll = append(rssAll, soak.Sample{At: s.At, Value: float64(s.RSS)})
		}
		if s.Gen == lastGen && s.Age >= r.CatchUp {
			heapLast = append(heapLast, soak.Sample{At: s.At, Value: float64(s.HeapLive)})
			goLast = append(goLast, soak.Sample{At: s.At, Value: float64(s.Goroutines)})
			rssLast = append(rssLast, soak.Sample{At: s.At, Value: float64(s.RSS)})
		}
	}
	for _, s := range r.placer {
		if s.At >= r.Warmup && s.At <= r.placingEnded {
			placerHeap = append(placerHeap, soak.Sample{At: s.At, Value: float64(s.HeapLive)})
			placerGo = append(placerGo, soak.Sample{At: s.At, Value: float64(s.Goroutines)})
			placerRSS = append(placerRSS, soak.Sample{At: s.At, Value: float64(s.RSS)})
		}
	}
	for _, s := range r.lags {
		switch {
		case s.Err != "":
			r.lagErrors++
		case s.At <= r.placingEnded:
			lags = append(lags, soak.Sample{At: s.At, Value: s.EventsLag()})
			outboxLags = append(outboxLags, soak.Sample{At: s.At, Value: s.OutboxLag()})
		}
	}
	var err error
	r.heapAll, err = soak.WithinRatio("runner heap (all generations)", heapAll, heapRatio)
	check(err)
	r.heapLast, err = soak.WithinRatio("runner heap (last generation)", heapLast, heapRatio)
	check(err)
	r.goAll, err = soak.WithinRise("runner goroutines (all generations)", goAll, goroutineRise)
	check(err)
	r.goLast, err = soak.WithinRise("runner goroutines (last generation)", goLast, goroutineRise)
	check(err)
	r.placerHeap, err = soak.WithinRatio("placer heap", placerHeap, heapRatio)
	check(err)
	r.placerGo, err = soak.WithinRise("placer goroutines", placerGo, goroutineRise)
	check(err)
	r.rssAll, err = soak.WithinRatio("runner RSS (all generations)", rssAll, heapRatio)
	check(err)
	r.rssLast, err = soak.WithinRatio("runner RSS (last generation)", rssLast, heapRatio)
	check(err)
	r.placerRSS, err = soak.WithinRatio("placer RSS", placerRSS, heapRatio)
	check(err)
	r.lag, err = soak.Bounded(lags, r.starts, r.CatchUp, r.LagBound)
	check(err)
	r.outboxLag, err = soak.Bounded(outboxLags, r.starts, r.CatchUp, r.LagBound)
	check(err)

	// Each process counts from its start: a generation's last sample holds
	// its totals.
	lastOf := map[int]genSample{}
	for _, s := range r.runner {
		lastOf[s.Gen] = s
	}
	for _, s := range lastOf {
		r.handled += s.Handled
		r.duplicates += s.Duplicates
		r.conflicts += s.Conflicts
	}
	end, found := lastOf[lastGen]
	r.parked, r.gaps = end.Parked, end.Gaps
	switch {
	case !found:
		r.failures = append(r.failures, "the last runner reported no sample")
	case r.parked != 0 || r.gaps != 0:
		r.failures = append(r.failures, fmt.Sprintf("the last runner ended with %d parked instances and %d open gaps", r.parked, r.gaps))
	}
}

// valid is the verdict: history checks out and every judgement passed.
func (r *report) valid() bool { return r.outcome.Valid() && len(r.failures) == 0 }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func mb(v float64) string { return fmt.Sprintf("%.1f", v/(1<<20)) }

// log prints the report, in the shape of docs/reliability.md's Soak
// section.
func (r *report) log(t *testing.T) {
	o := r.outcome
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("soak: orders placed for %s at %.0f/s by %d workers (placing took %s), drained in %s; seed %d",
		r.Duration, r.Rate, r.Workers, r.placed.Took.Round(time.Second), r.drained.Round(time.Millisecond), r.seed)
	w("load average (1/5/15 min): %s before, %s after", r.loadBefore, loadAverage())
	w("runner kills: %d (every %s-%s until %s), generations: %d", r.kills, r.KillMin, r.KillMax, r.KillUntil, len(r.starts))
	w("orders: attempted %d, acknowledged %d, applied %d, lost %d, duplicated %d, unexpected %d",
		o.Attempted, o.Acknowledged, o.Applied, o.Lost, o.Duplicated, o.Unexpected)
	w("        confirmed %d, rejected for seats %d, payment refused %d; in flight at the end %d",
		o.Confirmed, o.RejectedSeats, o.Refused, o.InFlight)
	w("dispatches %d, failed and retried %d %s", r.placed.Dispatches, r.placed.Errors, r.placed.LastError)
	w("runner heap live MB, all generations: first %s last %s (x%.2f, min %s max %s, %d samples)",
		mb(r.heapAll.First), mb(r.heapAll.Last), r.heapAll.Ratio(), mb(r.heapAll.Min), mb(r.heapAll.Max), r.heapAll.Samples)
	w("runner heap live MB, last generation: first %s last %s (x%.2f, %d samples)",
		mb(r.heapLast.First), mb(r.heapLast.Last), r.heapLast.Ratio(), r.heapLast.Samples)
	w("runner goroutines, all generations: first %.0f last %.0f (min %.0f max %.0f); last generation: first %.0f last %.0f",
		r.goAll.First, r.goAll.Last, r.goAll.Min, r.goAll.Max, r.goLast.First, r.goLast.Last)
	w("runner RSS MB, all generations: first %s last %s (x%.2f, min %s max %s); last generation: first %s last %s (x%.2f)",
		mb(r.rssAll.First), mb(r.rssAll.Last), r.rssAll.Ratio(), mb(r.rssAll.Min), mb(r.rssAll.Max), mb(r.rssLast.First), mb(r.rssLast.Last), r.rssLast.Ratio())
	w("placer RSS MB: first %s last %s (x%.2f, min %s max %s)",
		mb(r.placerRSS.First), mb(r.placerRSS.Last), r.placerRSS.Ratio(), mb(r.placerRSS.Min), mb(r.placerRSS.Max))
	w("placer heap live MB: first %s last %s (x%.2f); goroutines first %.0f last %.0f (min %.0f max %.0f)",
		mb(r.placerHeap.First), mb(r.placerHeap.Last), r.placerHeap.Ratio(), r.placerGo.First, r.placerGo.Last, r.placerGo.Min, r.placerGo.Max)
	w("events lag (events): median %.0f, max %.0f; after catch-up max %.0f (bound %.0f); catch-up after a restart at most %s",
		r.lag.Median, r.lag.Max, r.lag.SteadyMax, r.LagBound, r.lag.CaughtUpMax())
	w("outbox lag (events): median %.0f, max %.0f; after catch-up max %.0f; catch-up at most %s; %d lag samples failed",
		r.outboxLag.Median, r.outboxLag.Max, r.outboxLag.SteadyMax, r.outboxLag.CaughtUpMax(), r.lagErrors)
	w("runner stats summed over generations: handled %d, duplicates %d, conflicts %d; at the end parked %d, gaps %d",
		r.handled, r.duplicates, r.conflicts, r.parked, r.gaps)
	for _, n := range r.notes {
		w("not judged at this size: %s", n)
	}
	for _, f := range r.failures {
		w("FAILED: %s", f)
	}
	for _, e := range o.Examples {
		w("example: %s", e)
	}
	w("valid? %v", r.valid())
	t.Log("\n" + b.String())
}
