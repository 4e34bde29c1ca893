package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/saga"
)

// drain stops the faults and lets the system settle: ticks of a second
// while anything changes or is in flight, then time moves to the next
// deadline (or past the operator's patience with a gap), until nothing is
// left to wait for.
func (w *tabWorld) drain() error {
	w.inj.on, w.draining = false, true
	w.tracef("faults stop; %s drains", map[bool]string{true: "the second runner alone", false: "every runner"}[w.aloneB])
	for end, quiet := w.tick+drainTicks, 0; w.tick < end; w.tick++ {
		before := w.logLength()
		w.quiet = quiet > 0
		if err := w.step(time.Second); err != nil {
			return err
		}
		if w.logLength() != before || !w.settled() {
			quiet = 0
			continue
		}
		if quiet++; quiet < 2 {
			continue
		}
		wait, ok := w.timeLeft()
		if !ok {
			return nil
		}
		w.clock.Advance(wait)
		quiet = 0
	}
	w.violate("liveness: the system was still busy %d ticks after the faults stopped", drainTicks)
	return nil
}

// settled reports that nothing is in flight: every stored event and
// outside message sent and delivered, every damaged instance repaired.
func (w *tabWorld) settled() bool {
	for _, t := range w.tabs {
		if t.corrupt > 0 || !t.items[len(t.items)-1].stored {
			return false
		}
		for _, s := range t.scans {
			if !s.sent && !s.lost {
				return false
			}
		}
	}
	return len(w.pool) == 0 && (w.aloneB || len(w.bridge.pool) == 0)
}

// timeLeft returns how far to move time for something to change: to the
// next deadline the runner that drains knows of, or past the operator's
// patience when a gap is open; ok is false when nothing waits.
func (w *tabWorld) timeLeft() (time.Duration, bool) {
	r := w.a.runner
	if w.aloneB {
		r = w.b.runner
	}
	st, err := r.Stats(w.ctx)
	if err != nil {
		return time.Minute, true
	}
	if st.DeadlinesPending > 0 {
		return max(st.NextDeadline.Sub(w.clock.Now()), time.Minute), true
	}
	if len(r.Gaps()) > 0 || len(w.b.runner.Gaps()) > 0 {
		return gapPatience, true
	}
	return 0, false
}

// check runs the checks of a finished run of the tab workload, through a
// runner of code that reads every record any version wrote.
func (w *tabWorld) check() error {
	view := &repairedView{Store: w.mem, fixed: map[string]eventstore.Event{}}
	for _, t := range w.tabs {
		if t.corrupted {
			if err := view.fix(w, t); err != nil {
				return err
			}
		}
	}
	c, err := w.process("checker", 2, true, view, saga.RunnerOptions{NoCache: true})
	if err != nil {
		return err
	}
	sent := make(map[string]sentBy)
	for _, t := range w.tabs {
		if err := w.checkTab(c, view, t, sent); err != nil {
			return err
		}
	}
	return w.checkTabCommands(sent)
}

// repairedView is the store as the operator's repairs left it, for the
// checker: the record damaged under an instance reads as the copy of the
// record before it that the repair appended after it, so that the
// instance's whole history reads.
type repairedView struct {
	eventstore.Store
	// fixed are, by stream, the damaged event with the content of the one
	// before it.
	fixed map[string]eventstore.Event
}

// fix reads tab t's damaged record as a copy of the one before it.
func (v *repairedView) fix(w *tabWorld, t *tab) error {
	stream := saga.StreamPrefix + "tab-" + t.id
	var good, bad eventstore.Event
	for ev, err := range w.mem.ReadStream(w.ctx, stream, eventstore.ReadOptions{From: t.damaged - 1, Limit: 2}) {
		if err != nil {
			return err
		}
		if ev.Version == t.damaged {
			bad = ev
		} else {
			good = ev
		}
	}
	if bad.Version != t.damaged || good.Version+1 != t.damaged {
		return fmt.Errorf("sim: the damaged record %s#%d is not where it was put", stream, t.damaged)
	}
	bad.Type, bad.SchemaVersion, bad.Data, bad.Metadata = good.Type, good.SchemaVersion, good.Data, good.Metadata
	v.fixed[stream] = bad
	return nil
}

// ReadStream reads a damaged record as its fixed copy.
func (v *repairedView) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	inner := v.Store.ReadStream(ctx, stream, opts)
	fix, ok := v.fixed[stream]
	if !ok {
		return inner
	}
	return func(yield func(eventstore.Event, error) bool) {
		for ev, err := range inner {
			if err == nil && ev.Version == fix.Version {
				ev = fix
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// operatorStep learns from step s of tab t's history what an operator did
// (the calls' errors do not say: an action whose append failed after the
// write, or whose drain failed, took effect all the same): a skipped
// command is settled without taking effect, or with one; a skipped event
// and the messages of a released gap are handled once or not at all.
func (w *tabWorld) operatorStep(view eventstore.Store, t *tab, s saga.Step) error {
	u := &w.stats.Tab
	switch {
	case t.corrupted && s.Version == t.damaged:
		// The damaged record, read as a copy of the step before it.
	case s.Kind == "skipped" && s.Command != "":
		u.Skips++
		w.skipped[s.Command] = true
	case s.Kind == "skipped" && s.Deadline == "":
		u.Skips++
		t.touched[w.name(s.Source, s.Sequence)] = true
	case s.Kind == "skipped":
		u.Skips++
	case s.Kind == "released" && s.EventID == uuid.Nil && s.Type == "":
		// An operator's Release (a drain's released step names the message
		// it took): the messages of the source from where the step before
		// had it up to the lowest held were passed over.
		u.Releases++
		next, err := nextOf(w, view, t, s.Version-1, s.Source)
		if err != nil {
			return err
		}
		for seq := next; seq < s.Sequence; seq++ {
			t.touched[w.name(s.Source, seq)] = true
		}
	}
	return nil
}

// nextOf returns the first sequence of source that tab t's record at
// version had not taken in order, read from the record's stored form (the
// saga's step record, schema version 2: its "sources" map a source to its
// progress, whose "next" that is). History does not show it.
func nextOf(w *tabWorld, view eventstore.Store, t *tab, version uint64, source string) (uint64, error) {
	stream := saga.StreamPrefix + "tab-" + t.id
	for ev, err := range view.ReadStream(w.ctx, stream, eventstore.ReadOptions{From: version, Limit: 1}) {
		if err != nil {
			return 0, err
		}
		var rec struct {
			Sources map[string]struct {
				Next uint64 `json:"next"`
			} `json:"sources"`
		}
		if ev.Version != version || ev.SchemaVersion != 2 {
			break
		}
		if err := json.Unmarshal(ev.Data, &rec); err != nil {
			return 0, fmt.Errorf("sim: reading %s#%d: %w", stream, version, err)
		}
		return rec.Sources[source].Next, nil
	}
	return 0, fmt.Errorf("sim: %s has no step record of schema version 2 at %d", stream, version)
}

// checkTab checks one tab: it ended (complete, nothing parked, held,
// pending or unsent), every message its sources sent was handled exactly
// once (or not at all when an operator skipped it or released its gap),
// none that they did not send, every rejected charge compensated once,
// and its handlers saw no broken promise. The commands its steps recorded
// are added to sent.
func (w *tabWorld) checkTab(c *tabProc, view eventstore.Store, t *tab, sent map[string]sentBy) error {
	u := &w.stats.Tab
	u.Tabs++
	recorded := make(map[string]uint64) // the last version that recorded each command
	for s, err := range c.runner.History(w.ctx, t.id) {
		if err != nil {
			return fmt.Errorf("sim: the history of tab %s: %w", t.id, err)
		}
		w.stats.Steps++
		if s.Kind == "redriven" {
			// The steps from s.Sequence on run again on the fixed code: what
			// they recorded and the run does not record again is no longer
			// the instance's to send (Runner.Redrive).
			for id, v := range recorded {
				if v >= s.Sequence {
					by := sent[id]
					by.superseded = true
					sent[id] = by
				}
			}
		}
		for _, cmd := range s.Commands {
			sent[cmd.ID] = sentBy{order: t.id, typ: cmd.Type}
			recorded[cmd.ID] = s.Version
		}
		if err := w.operatorStep(view, t, s); err != nil {
			return err
		}
	}
	x, err := c.runner.Explain(w.ctx, t.id)
	if err != nil {
		if !t.corrupted {
			return err
		}
		w.violate("tab %s: explaining the repaired instance failed: %v", t.id, err)
		return nil
	}
	for _, cmd := range x.Unsent {
		w.violate("liveness: tab %s: command %s (%s) was never confirmed sent", t.id, cmd.ID, cmd.Type)
	}
	switch {
	case x.Parked != nil:
		w.violate("liveness: tab %s is parked on %s: %s", t.id, x.Parked.ID, x.Parked.Error)
	case !x.Completed:
		w.violate("liveness: tab %s is not complete (%d held, %d deadlines pending: %v)", t.id, len(x.Held), len(x.Deadlines), x.Deadlines)
	}
	if x.State == nil {
		w.violate("liveness: tab %s never started", t.id)
		return nil
	}
	s := x.State
	for _, p := range s.Problems {
		w.violate("safety: tab %s: %s", t.id, p)
	}
	expected := map[string]bool{}
	expect := func(name string, charge any) {
		expected[name] = true
		u.Messages++
		switch n := s.Seen[name]; {
		case n == 1:
			u.Handled++
		case n > 1:
			w.violate("safety: tab %s: %s handled %d times", t.id, name, n)
		case t.touched[name]:
			u.Touched++
		default:
			w.violate("safety: tab %s: %s was never handled (and no operator skipped it or released its gap)", t.id, name)
		}
		if ref, rejected := rejectedCharge(charge); rejected && s.Seen[name] == 1 {
			w.compensated(t, s, ref)
		}
	}
	for _, it := range t.items {
		var charge any
		if item, ok := it.ev.(TabItem); ok && item.Account != "" {
			charge = Charge{Account: item.Account, Ref: "item/" + uitoa(it.k)}
		}
		expect(msgName("feed", it.k), charge)
	}
	for _, sc := range t.scans {
		name := msgName(sc.source, sc.seq)
		if sc.lost {
			u.Lost++
			continue
		}
		var charge any
		if tick, ok := sc.ev.(TabTick); ok && tick.Account != "" {
			charge = Charge{Account: tick.Account, Ref: "tick/" + name}
		}
		expect(name, charge)
	}
	for name := range s.Seen {
		if !expected[name] {
			w.violate("safety: tab %s handled %s, which no source sent", t.id, name)
		}
	}
	if x.Completed {
		if _, rejected := rejectedCharge(Charge{Account: s.Close, Ref: "close"}); rejected {
			w.compensated(t, s, "close")
		}
	}
	return nil
}

// rejectedCharge returns the ref of a charge its account rejects.
func rejectedCharge(v any) (string, bool) {
	c, ok := v.(Charge)
	return c.Ref, ok && strings.HasPrefix(c.Account, "reject-")
}

// compensated checks that the rejected charge ref of tab t was refunded
// once in its history.
func (w *tabWorld) compensated(t *tab, s *Tab, ref string) {
	if n := s.Compensated[ref]; n != 1 {
		w.violate("safety: tab %s: the rejected charge %s was compensated %d times", t.id, ref, n)
		return
	}
	w.stats.Tab.Compensated++
}

// checkTabCommands accounts for every command of the tabs: each one a step
// recorded took effect exactly once (one event, or one recorded
// rejection), but those an operator skipped (at most once: a command that
// no longer decodes may have been carried out by the code that still
// could) and those sent to a panicking account (never); nothing took
// effect that no step recorded.
func (w *tabWorld) checkTabCommands(sent map[string]sentBy) error {
	effects := make(map[string][]string)
	refusals := make(map[string]int)
	for ev, err := range w.mem.ReadAll(w.ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		if !strings.HasPrefix(ev.StreamID, "account-") {
			continue
		}
		id := ev.Metadata.CommandID
		effects[id] = append(effects[id], fmt.Sprintf("%s#%d %s", ev.StreamID, ev.Version, ev.Type))
		if busrepo.IsRejection(&ev) {
			refusals[id]++
		}
	}
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cs := &w.stats.Commands
	for _, id := range ids {
		by, tracked := sent[id], w.cmds[id]
		what := fmt.Sprintf("command %s (%s of tab %s)", id, by.typ, by.order)
		cs.Attempted++
		stored := effects[id]
		poison := tracked != nil && tracked.command != nil && strings.HasPrefix(tracked.command.AggregateID(), "panic-")
		switch {
		case w.skipped[id] || poison:
			w.stats.Tab.SkippedCmds++
			if len(stored) > 1 || (poison && len(stored) > 0) {
				cs.Duplicated++
				w.violate("safety: %s, skipped by the operator, took effect %d times: %v", what, len(stored), stored)
			}
			// A Redrive from before the step that sent a parked poison
			// command takes the command back with the step: the instance
			// no longer holds it, so nothing is left for an operator to
			// skip.
			if poison && !w.skipped[id] && !by.superseded {
				w.violate("liveness: %s, which its account cannot carry out, was never skipped", what)
			}
			continue
		case by.superseded:
			if len(stored) > 1 {
				cs.Duplicated++
				w.violate("safety: %s, which a Redrive superseded, took effect %d times: %v", what, len(stored), stored)
			}
			continue
		case tracked != nil && tracked.acknowledged:
			cs.Acknowledged++
		default:
			w.violate("liveness: %s was never acknowledged", what)
		}
		rejected := tracked != nil && tracked.rejected
		switch {
		case len(stored) == 0:
			cs.Lost++
			w.violate("safety: %s took no effect", what)
		case len(stored) > 1:
			cs.Applied++
			cs.Duplicated++
			w.violate("safety: %s took effect %d times: %v", what, len(stored), stored)
		case rejected != (refusals[id] == 1):
			cs.Applied++
			w.violate("safety: %s: the bus answered rejected=%v, and the store holds %v", what, rejected, stored)
		default:
			cs.Applied++
		}
	}
	var unexpected []string
	for id := range effects {
		if _, ok := sent[id]; !ok {
			unexpected = append(unexpected, id)
		}
	}
	slices.Sort(unexpected)
	for _, id := range unexpected {
		cs.Unexpected += len(effects[id])
		w.violate("safety: events %v carry command ID %q, which no step recorded", effects[id], id)
	}
	return nil
}
