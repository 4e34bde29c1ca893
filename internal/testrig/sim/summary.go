package sim

import (
	"fmt"
	"slices"
	"strings"
)

// Totals add up the results of many seeds.
type Totals struct {
	Seeds int
	// Failed are the seeds whose checks failed, lowest first.
	Failed []uint64
	Stats  Stats
}

// Add counts one seed's result.
func (t *Totals) Add(r *Result) {
	t.Seeds++
	if !r.Valid() {
		i, _ := slices.BinarySearch(t.Failed, r.Config.Seed)
		t.Failed = slices.Insert(t.Failed, i, r.Config.Seed)
	}
	s, a := &t.Stats, r.Stats
	s.Orders += a.Orders
	s.Confirmed += a.Confirmed
	s.Rejected += a.Rejected
	s.TimedOut += a.TimedOut
	s.SettledInTime += a.SettledInTime
	s.SettledLate += a.SettledLate
	for k := range a.Faults {
		s.Faults[k] += a.Faults[k]
	}
	c, d := &s.Commands, a.Commands
	c.Attempted += d.Attempted
	c.Acknowledged += d.Acknowledged
	c.Applied += d.Applied
	c.Lost += d.Lost
	c.Duplicated += d.Duplicated
	c.Unexpected += d.Unexpected
	s.DuplicatesAbsorbed += a.DuplicatesAbsorbed
	s.ReordersRepaired += a.ReordersRepaired
	s.Crashes += a.Crashes
	s.Steps += a.Steps
	s.Ticks += a.Ticks
	s.Tab.add(a.Tab)
}

// Summary describes the totals in a few lines.
func (t *Totals) Summary() string {
	s := t.Stats
	var b strings.Builder
	verdict := "valid"
	if len(t.Failed) > 0 {
		verdict = fmt.Sprintf("INVALID: %d seeds failed (first %d)", len(t.Failed), t.Failed[0])
	}
	fmt.Fprintf(&b, "seeds: %d, %s\n", t.Seeds, verdict)
	if s.Tab.Tabs > 0 {
		u := s.Tab
		fmt.Fprintf(&b, "tabs: %d; messages %d sent (%d never), %d handled once, %d left unhandled by the operator; %d rejected charges compensated\n",
			u.Tabs, u.Messages, u.Lost, u.Handled, u.Touched, u.Compensated)
		fmt.Fprintf(&b, "operator: %d retries, %d skips (%d of commands), %d releases, %d re-drives (%d refused), %d actions refused as stale; %d repairs of %d damaged instances, %d dead letters\n",
			u.Retries, u.Skips, u.SkippedCmds, u.Releases, u.Redrives, u.RedrivesRefused, u.StaleRefused, u.Repairs, u.Corruptions, u.DeadLetters)
		fmt.Fprintf(&b, "deliveries refused as too large to hold: %d; second runner catch-ups: %d; seeds deploying the fixed code: %d\n",
			u.TooLarge, u.SecondCatchUps, u.Deployed)
	}
	if s.Orders > 0 {
		fmt.Fprintf(&b, "orders: %d (%d confirmed, %d rejected); payment deadline fired first for %d; provider settled %d in time, %d late\n",
			s.Orders, s.Confirmed, s.Rejected, s.TimedOut, s.SettledInTime, s.SettledLate)
	}
	c := s.Commands
	fmt.Fprintf(&b, "commands: attempted %d, acknowledged %d, applied %d, lost %d, duplicated %d, unexpected %d\n",
		c.Attempted, c.Acknowledged, c.Applied, c.Lost, c.Duplicated, c.Unexpected)
	total := 0
	var kinds []string
	for k, n := range s.Faults {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d", Kind(k), n))
	}
	fmt.Fprintf(&b, "faults: %d (%s)\n", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&b, "process crashes: %d; duplicates absorbed: %d; reorders repaired: %d; saga steps: %d; ticks: %d\n",
		s.Crashes, s.DuplicatesAbsorbed, s.ReordersRepaired, s.Steps, s.Ticks)
	return b.String()
}
