package sim

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

// deliverExternal is the outside sources' turn: each tab's ticks and pings
// are sent once the tab is open (a source learns of a tab from it), then
// carried at least once, out of order, to the production runner or the
// second one. One that a runner refuses (too large to hold now, or its
// instance damaged) is redelivered later, as a broker does with a message
// it was not acknowledged for.
func (w *tabWorld) deliverExternal() error {
	for _, t := range w.tabs {
		if !w.opened(t) {
			continue
		}
		for _, s := range t.scans {
			if !s.sent && !s.lost && s.at <= w.tick {
				s.sent, s.due = true, w.tick
				w.pool = append(w.pool, s)
			}
		}
	}
	for range perTick {
		var eligible []*scan
		for _, s := range w.pool {
			if s.due <= w.tick {
				eligible = append(eligible, s)
			}
		}
		if len(eligible) == 0 {
			return nil
		}
		i, due := w.transit(len(eligible))
		s := eligible[i]
		if due >= 0 {
			s.due = due
			continue
		}
		if err := w.deliverScan(s); err != nil {
			return err
		}
	}
	return nil
}

// opened reports whether tab t's instance has a stream.
func (w *tabWorld) opened(t *tab) bool {
	for range w.mem.ReadStream(w.ctx, saga.StreamPrefix+"tab-"+t.id, eventstore.ReadOptions{Limit: 1}) {
		return true
	}
	return false
}

// deliverScan delivers s once, to whichever runner runs now.
func (w *tabWorld) deliverScan(s *scan) error {
	p := w.a
	if (w.draining && w.aloneB) || w.choose.IntN(4) == 0 {
		p = w.b
	}
	what := fmt.Sprintf("deliver %s %s#%d %T to %s", s.source, s.tab.id, s.seq, s.ev, p.name)
	w.op()
	out, err := p.runner.Deliver(w.ctx, saga.Delivery{Source: s.source, Sequence: s.seq, ID: s.id, Event: s.ev})
	switch {
	case errors.Is(err, saga.ErrRecordTooLarge):
		w.stats.Tab.TooLarge++
		w.tracef("%s: refused, too large to hold now", what)
		s.due = w.tick + 2
		return nil
	case err != nil && instanceProblem(err) && s.tab.corrupt > 0:
		w.tracef("%s: refused, its instance is damaged", what)
		s.due = w.tick + 1
		return nil
	case err != nil:
		s.due = w.tick + 1
		if p == w.b {
			w.tracef("%s: error: %v", what, err)
			if !errors.Is(err, ErrInjected) {
				w.violate("%s failed on its own: %v", what, err)
			}
			return nil
		}
		_, err := w.failed(what, err, CrashStep)
		return err
	}
	w.tracef("%s: %s", what, out)
	if out == saga.Ignored {
		w.violate("%s was ignored: its instance is open and not complete", what)
	}
	w.pool = slices.DeleteFunc(w.pool, func(o *scan) bool { return o == s })
	if dup, aux := w.inj.fault(Duplicate); dup {
		c := *s
		c.due = w.tick + int(aux%4)
		w.pool = append(w.pool, &c)
	}
	return nil
}

// snapshotStore is the store as the second runner reads it: a read of the
// log yields what was stored when the read began. The runner's consumers
// read ahead in a goroutine of their own while the handler appends; a live
// read would see some of those appends or not, by the scheduler's whim.
type snapshotStore struct {
	eventstore.Store
	advance func()
}

// Append moves the clock after a write, as faultStore does.
func (s *snapshotStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, events...)
	if err == nil {
		s.advance()
	}
	return res, err
}

// ReadAll reads everything at once, then yields it.
func (s *snapshotStore) ReadAll(ctx context.Context, after eventstore.Position, f eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	var evs []eventstore.Event
	var failure error
	for ev, err := range s.Store.ReadAll(ctx, after, f) {
		if err != nil {
			failure = err
			break
		}
		evs = append(evs, ev)
	}
	return func(yield func(eventstore.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		if failure != nil {
			yield(eventstore.Event{}, failure)
		}
	}
}

// raceStore is the store as the operator's process sees it: when it has
// read an instance's stream, another process may step that instance before
// the operator acts on what it read (see tabWorld.race).
type raceStore struct {
	eventstore.Store
	w *tabWorld
}

// ReadStream runs the race once the read is over.
func (s *raceStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	inner := s.Store.ReadStream(ctx, stream, opts)
	return func(yield func(eventstore.Event, error) bool) {
		defer s.w.race(stream)
		for ev, err := range inner {
			if !yield(ev, err) {
				return
			}
		}
	}
}
