package saga

import (
	"context"
	"log/slog"
	"slices"
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

// heldWait returns the sequence of its source that held message h waits
// for, given the progress in rec, and whether that is a gap: a message
// missing, rather than its turn. A message is not waiting for a gap when
// it would be taken as soon as the instance goes on (its source's next
// one, one already taken, one of a type that anyOrder says is handled out
// of order while there is room), or when it waits only behind the parked
// message of its source and the messages held between.
func heldWait(rec *record, h envelope, anyOrder func(typeName string) bool) (uint64, bool) {
	if h.kind() != kindEvent || h.Ordered {
		return h.Sequence, false
	}
	p := rec.Sources[h.Source]
	if h.Sequence <= p.Next || p.taken(h.Sequence) || (anyOrder(h.Type) && !p.full()) {
		return h.Sequence, false
	}
	next := p.Next
	if parked, ok := parkedAt(rec, h.Source); ok && parked >= next && parked < h.Sequence {
		next = parked + 1
	}
	for next < h.Sequence && (p.taken(next) || heldAt(rec, h.Source, next)) {
		next++
	}
	if next >= h.Sequence {
		return h.Sequence, false
	}
	return next, true
}

// heldAt reports whether rec holds the delivery of source at sequence seq.
func heldAt(rec *record, source string, seq uint64) bool {
	return slices.ContainsFunc(rec.Held, func(h envelope) bool {
		return h.kind() == kindEvent && !h.Ordered && h.Source == source && h.Sequence == seq
	})
}

// parkedAt returns the sequence of the event of source that rec is parked
// on, if it is parked on one.
func parkedAt(rec *record, source string) (uint64, bool) {
	m := rec.Parked
	if m == nil || m.Message.kind() != kindEvent || m.Message.Source != source {
		return 0, false
	}
	return m.Message.Sequence, true
}

// parkedBelow reports whether rec is parked on an event of source below
// sequence seq: passing over it would drop it, so that the Retry after the
// fix would find it taken.
func parkedBelow(rec *record, source string, seq uint64) bool {
	parked, ok := parkedAt(rec, source)
	return ok && parked < seq
}

// gapsOf returns the gaps that record rec of instance id leaves open, one
// per source.
func gapsOf(id string, rec *record, anyOrder func(typeName string) bool) []Gap {
	var out []Gap
	for _, h := range rec.Held {
		seq, gap := heldWait(rec, h, anyOrder)
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

// Gaps returns the gaps that instances of the saga wait for, oldest first,
// as this runner knows them: from the steps it stored and the step records
// its outbox read. Each is one instance and source; give up on one with
// [Runner.Release].
func (r *Runner[S]) Gaps() []Gap { return r.stuck.gaps() }

// watchGaps warns, once each, about the gaps open longer than the gap
// alert, checking a few times per alert period, until ctx ends.
func (r *Runner[S]) watchGaps(ctx context.Context) error {
	if r.opts.NoGapAlert {
		return nil
	}
	alert := r.opts.GapAlert
	if alert <= 0 {
		alert = DefaultGapAlert
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.e.after(alert / 4):
		}
		for _, gap := range r.stuck.overdue(r.e.now().Add(-alert)) {
			r.e.log.WarnContext(ctx, "saga: an instance waits for a message that has not arrived; Release gives up on it",
				slog.String("saga", r.e.t.name), slog.String("instance", gap.Instance), slog.String("source", gap.Source),
				slog.Uint64("waits_for", gap.WaitsFor), slog.Int("held", gap.Held), slog.Duration("age", r.e.now().Sub(gap.Since)))
		}
	}
}
