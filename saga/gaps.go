package saga

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// DefaultGapAlert is how long a held message waits for a gap in its source
// before the runner warns about it, by default.
const DefaultGapAlert = time.Minute

// Gap is an instance whose held messages wait for a message of their
// source that has not arrived: a gap that fills by itself when the source
// delivers it, or that an operator gives up on with [Runner.Release].
type Gap struct {
	Instance string
	// Source is where the missing message comes from, and WaitsFor its
	// sequence: the one after the instance's watermark for Source.
	Source   string
	WaitsFor uint64
	// Held is how many messages of Source wait behind the gap, and Since
	// when the first of them was held.
	Held  int
	Since time.Time
}

// waitsFor returns the sequence of its source that held message h waits
// for, given the progress in rec, and whether that is a gap (rather than
// its turn behind a parked message).
func waitsFor(rec *record, h envelope) (uint64, bool) {
	if h.kind() != kindEvent || h.Ordered {
		return h.Sequence, false
	}
	p := rec.Sources[h.Source]
	if h.Sequence > p.Next && !parkedBelow(rec, h.Source, h.Sequence) {
		return p.Next, true
	}
	return h.Sequence, false
}

// parkedBelow reports whether rec is parked on an event of source below
// sequence seq: what waits above it waits for that message's turn, which
// an operator decides (Retry, Skip), not for a message that is missing.
func parkedBelow(rec *record, source string, seq uint64) bool {
	m := rec.Parked
	return m != nil && m.Message.kind() == kindEvent && m.Message.Source == source && m.Message.Sequence < seq
}

// gapsOf returns the gaps that record rec of instance id leaves open, one
// per source.
func gapsOf(id string, rec *record) []Gap {
	var out []Gap
	for _, h := range rec.Held {
		seq, gap := waitsFor(rec, h)
		if !gap {
			continue
		}
		if i := slices.IndexFunc(out, func(g Gap) bool { return g.Source == h.Source }); i >= 0 {
			out[i].Held++
			if h.Since.Before(out[i].Since) {
				out[i].Since = h.Since
			}
			continue
		}
		out = append(out, Gap{Instance: id, Source: h.Source, WaitsFor: seq, Held: 1, Since: h.Since})
	}
	return out
}

// gapIndex is a runner's index of open gaps: per instance, those its
// latest record leaves open, as the runner saw that record (its own steps,
// and the records its outbox reads).
type gapIndex struct {
	mu      sync.Mutex
	open    map[string][]Gap
	version map[string]uint64
	// warned holds the gaps already warned about, so that each is logged
	// once.
	warned map[Gap]bool
}

func newGapIndex() *gapIndex {
	return &gapIndex{open: make(map[string][]Gap), version: make(map[string]uint64), warned: make(map[Gap]bool)}
}

// observe records the gaps that record version of instance id leaves open,
// unless a later record of it was observed already.
func (g *gapIndex) observe(id string, version uint64, rec *record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v, seen := g.version[id]; seen && v > version {
		return
	}
	gaps := gapsOf(id, rec)
	if len(gaps) == 0 {
		delete(g.open, id)
		delete(g.version, id)
		for k := range g.warned {
			if k.Instance == id {
				delete(g.warned, k)
			}
		}
		return
	}
	g.open[id], g.version[id] = gaps, version
}

// knows reports whether the index holds gaps of instance id.
func (g *gapIndex) knows(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[id] != nil
}

// list returns the open gaps, oldest first.
func (g *gapIndex) list() []Gap {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Gap
	for _, gaps := range g.open {
		out = append(out, gaps...)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Instance < out[j].Instance
	})
	return out
}

// overdue returns the gaps open since before cutoff that were not returned
// before.
func (g *gapIndex) overdue(cutoff time.Time) []Gap {
	var out []Gap
	for _, gap := range g.list() {
		if !gap.Since.Before(cutoff) {
			break
		}
		key := gap
		key.Held, key.Since = 0, time.Time{}
		g.mu.Lock()
		fresh := !g.warned[key]
		g.warned[key] = true
		g.mu.Unlock()
		if fresh {
			out = append(out, gap)
		}
	}
	return out
}

// Gaps returns the gaps that instances of the saga wait for, oldest first,
// as this runner knows them: from the steps it stored and the step records
// its outbox read. Each is one instance and source; give up on one with
// [Runner.Release].
func (r *Runner[S]) Gaps() []Gap { return r.gaps.list() }

// watchGaps warns, once each, about the gaps open longer than the gap
// alert, checking a few times per alert period, until ctx ends.
func (r *Runner[S]) watchGaps(ctx context.Context) error {
	alert := r.opts.GapAlert
	if alert == 0 {
		alert = DefaultGapAlert
	}
	if alert < 0 {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.e.clock.After(alert / 4):
		}
		for _, gap := range r.gaps.overdue(r.e.now().Add(-alert)) {
			r.e.log.WarnContext(ctx, "saga: an instance waits for a message that has not arrived; Release gives up on it",
				slog.String("saga", r.e.t.name), slog.String("instance", gap.Instance), slog.String("source", gap.Source),
				slog.Uint64("waits_for", gap.WaitsFor), slog.Int("held", gap.Held), slog.Duration("age", r.e.now().Sub(gap.Since)))
		}
	}
}
