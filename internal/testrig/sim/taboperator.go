package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/sagaharness"
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/saga"
)

// gapPatience is how long the operator lets a gap wait before giving up
// on it (Release).
const gapPatience = 15 * time.Minute

// operate is the operator's turn: it looks at a few instances (every one
// in the drain), and acts on what it sees, on the fixed code, while the
// production runners go on: it retries or skips a parked message, releases
// a gap that waited too long, and now and then re-drives an instance. Now
// and then it acts on an earlier look instead (Stale), which the engine
// must refuse if the instance moved on. Damaged instances are repaired
// when their time comes.
func (w *tabWorld) operate() error {
	if err := w.repair(); err != nil {
		return err
	}
	for _, t := range w.tabs {
		if !w.quiet && w.choose.IntN(8) != 0 {
			continue
		}
		if t.corrupt > 0 {
			continue // the operator knows: it repairs first
		}
		if w.quiet && w.unchanged(t) {
			continue
		}
		x, ok := w.look(t)
		if !ok {
			continue
		}
		if stale, _ := w.inj.fault(Stale); stale {
			if old, seen := w.seen[t.id]; seen {
				x = old
			}
		}
		w.seen[t.id] = x
		w.act(w.o, t, x)
		if !w.draining && x.Exists && w.choose.IntN(40) == 0 {
			w.redrive(t, x)
		}
	}
	return nil
}

// unchanged reports whether the operator's last look at instance t still
// holds: it showed nothing to act on, now or once a gap has waited long
// enough, and no step was stored since. In the drain the operator looks
// at every instance whenever the system is quiet, most of which have
// long been idle: looking again at those was a third of a seed's time.
func (w *tabWorld) unchanged(t *tab) bool {
	x, ok := w.seen[t.id]
	if !ok || !x.Exists || x.Parked != nil || len(x.Held) > 0 {
		return false
	}
	last, ok := w.latest(saga.StreamPrefix + "tab-" + t.id)
	return ok && last.Version == x.Version
}

// look explains instance t through the operator's process.
func (w *tabWorld) look(t *tab) (saga.Explanation[Tab], bool) {
	x, err := w.o.runner.Explain(w.ctx, t.id)
	if err != nil {
		w.tracef("operator: explain %s: error: %v", t.id, err)
		if !errors.Is(err, ErrInjected) && t.corrupt == 0 && !t.corrupted {
			w.violate("operator: explaining %s failed: %v", t.id, err)
		}
		return x, false
	}
	if x.State != nil {
		for _, p := range x.State.Problems {
			w.violate("safety: tab %s: %s", t.id, p)
		}
	}
	return x, true
}

// act resolves what x shows: a parked message, or a gap older than the
// operator's patience.
func (w *tabWorld) act(p *tabProc, t *tab, x saga.Explanation[Tab]) {
	if m := x.Parked; m != nil {
		skip := m.Kind == "command" && w.choose.IntN(10) < 7 || m.Kind == "event" && w.choose.IntN(4) == 0
		if skip {
			// What a skip did is read from the history at the end (see
			// operatorSteps): one that returned an error may have been
			// stored all the same.
			w.acted(p, t, "skip", m.ID, p.runner.Skip(w.ctx, t.id, m.ID))
			return
		}
		_, err := p.runner.Retry(w.ctx, t.id, m.ID)
		w.acted(p, t, "retry", m.ID, err)
		return
	}
	for _, h := range x.Held {
		if h.Kind != "event" || h.WaitsFor == h.Sequence || w.clock.Now().Sub(h.Since) < gapPatience {
			continue
		}
		err := p.runner.Release(w.ctx, t.id, h.Source, h.WaitsFor)
		w.acted(p, t, "release", fmt.Sprintf("%s at %d", h.Source, h.WaitsFor), err)
		return
	}
}

// name is the name in Tab.Seen of the message at seq of source.
func (w *tabWorld) name(source string, seq uint64) string {
	if strings.HasPrefix(source, "feed-") {
		source = "feed"
	}
	return msgName(source, seq)
}

// acted traces and counts an operator's action. Refusals of an action on
// what the instance no longer has are expected (ErrStale); injected store
// failures too. Skips and releases are counted from the history, where
// the checker finds what the operators did.
func (w *tabWorld) acted(p *tabProc, t *tab, action, what string, err error) {
	s := &w.stats.Tab
	switch {
	case err == nil:
		w.tracef("%s: %s %s of %s", p.name, action, what, t.id)
		if action == "retry" {
			s.Retries++
		}
	case errors.Is(err, saga.ErrStale) || (action == "release" && errors.Is(err, eventstore.ErrInvalidArgument)):
		// Release of a gap whose held messages are gone (handled since the
		// look) is refused as an invalid argument, not as stale.
		s.StaleRefused++
		w.tracef("%s: %s %s of %s: refused as stale", p.name, action, what, t.id)
	case errors.Is(err, ErrInjected):
		w.tracef("%s: %s %s of %s: error: %v", p.name, action, what, t.id, err)
	default:
		w.violate("%s: %s %s of %s failed on its own: %v", p.name, action, what, t.id, err)
	}
}

// redrive re-drives instance t on the fixed code, from a step drawn among
// its history.
func (w *tabWorld) redrive(t *tab, x saga.Explanation[Tab]) {
	from := uint64(w.choose.IntN(int(x.Version) + 1))
	redriven, err := w.o.runner.Redrive(w.ctx, t.id, from)
	n := redriven.Messages
	var bad *eventstore.InvalidArgumentError
	switch {
	case err == nil:
		w.stats.Tab.Redrives++
		w.tracef("operator: redrive %s from %d: %d messages again", t.id, from, n)
	case errors.As(err, &bad), errors.Is(err, saga.ErrRecordTooLarge):
		// Refused before anything is written: a version past the history,
		// or (a heavy tab) more deliveries to hold again than one record
		// keeps; the operator redrives from a later step.
		w.stats.Tab.RedrivesRefused++
		w.tracef("operator: redrive %s from %d: refused: %v", t.id, from, err)
	case errors.Is(err, ErrInjected) || errors.Is(err, saga.ErrStale) || (t.corrupted && errors.Is(err, eventstore.ErrCorrupt)):
		w.tracef("operator: redrive %s from %d: error: %v", t.id, from, err)
	default:
		w.violate("operator: redrive %s from %d failed on its own: %v", t.id, from, err)
	}
}

// race is what another process does on the instance whose stream the
// operator's process just read, now and then: a delivery, a firing, or a
// colleague's action on what it sees.
func (w *tabWorld) race(stream string) {
	id, ok := strings.CutPrefix(stream, saga.StreamPrefix+"tab-")
	t := w.byID[id]
	if !ok || t == nil || w.racing || t.corrupt > 0 {
		return
	}
	if f, aux := w.inj.fault(Race); !f {
		return
	} else {
		w.racing = true
		defer func() { w.racing = false }()
		switch aux % 3 {
		case 0:
			for _, s := range w.pool {
				if s.tab == t && s.due <= w.tick {
					w.tracef("race: a delivery to %s", t.id)
					_ = w.deliverScan(s) // a crash it causes lands after the operator's action
					return
				}
			}
		case 1:
			w.tracef("race: the production runner fires what is due")
			if _, err := w.a.runner.FireDue(w.ctx); err != nil && !errors.Is(err, ErrInjected) {
				w.violate("race: firing failed on its own: %v", err)
			}
		default:
			x, err := w.colleague.runner.Explain(w.ctx, t.id)
			if err != nil {
				return
			}
			w.tracef("race: a colleague acts on %s", t.id)
			w.act(w.colleague, t, x)
		}
	}
}

// corrupt damages an instance's stream now and then: a foreign event, or a
// step record whose data is cut, appended at its head. The operator
// repairs it a few ticks later.
func (w *tabWorld) corrupt() error {
	f, aux := w.inj.fault(Corrupt)
	if !f || w.draining {
		return nil
	}
	var open []*tab
	for _, t := range w.tabs {
		if t.corrupt == 0 && !t.corrupted && w.opened(t) {
			open = append(open, t)
		}
	}
	if len(open) == 0 {
		return nil
	}
	t := open[aux%uint64(len(open))]
	stream := saga.StreamPrefix + "tab-" + t.id
	last, ok := w.latest(stream)
	if !ok {
		return nil
	}
	bad := eventstore.EventData{ID: w.uuid("corrupt", t.id), Type: "someone.elses", SchemaVersion: 1, Data: []byte(`{}`)}
	what := "a foreign event"
	if aux%2 == 0 {
		bad = eventstore.EventData{ID: bad.ID, Type: last.Type, SchemaVersion: last.SchemaVersion, Data: last.Data[:len(last.Data)/2]}
		what = "a damaged step record"
	}
	if _, err := w.mem.Append(trusted.Writer(w.ctx), stream, eventstore.Exact(last.Version), bad); err != nil {
		return err
	}
	t.corrupt, t.damaged, t.repairAt, t.corrupted = last.Version+1, last.Version+1, w.tick+2+int(aux%7), true
	w.stats.Tab.Corruptions++
	w.tracef("%s put at %s#%d", what, stream, last.Version+1)
	return nil
}

// latest returns the last event of stream.
func (w *tabWorld) latest(stream string) (eventstore.Event, bool) {
	for ev, err := range w.mem.ReadStream(w.ctx, stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
		return ev, err == nil
	}
	return eventstore.Event{}, false
}

// repair is the operator's repair of the damaged instances whose time has
// come (in the drain, all of them): it appends again the last record that
// reads (a copy of the step before the damage), then hands the events and
// records that became dead letters to the instance, oldest first, and
// deletes them. Nothing else steps the instance in between: until the
// dead letters are in, the instance would take a later event of a stream
// before the earlier ones waiting as dead letters.
func (w *tabWorld) repair() error {
	w.racing = true // nothing steps a damaged instance until its dead letters are in
	defer func() { w.racing = false }()
	for _, t := range w.tabs {
		if t.corrupt == 0 || (w.tick < t.repairAt && !w.draining) {
			continue
		}
		stream := saga.StreamPrefix + "tab-" + t.id
		var good eventstore.Event
		for ev, err := range w.mem.ReadStream(w.ctx, stream, eventstore.Forward(t.corrupt-1)) {
			if err != nil {
				return err
			}
			good = ev
			break
		}
		if !json.Valid(good.Data) {
			return fmt.Errorf("sim: the record before the damage of %s is not readable either", stream)
		}
		copied := eventstore.EventData{ID: w.uuid("repair", t.id), Type: good.Type, SchemaVersion: good.SchemaVersion, Data: good.Data, Metadata: good.Metadata}
		if _, err := w.mem.Append(trusted.Writer(w.ctx), stream, eventstore.Exact(t.corrupt), copied); err != nil {
			return err
		}
		w.tracef("operator: repaired %s with a copy of #%d", stream, good.Version)
		t.corrupt = 0
		w.stats.Tab.Repairs++
		if err := w.retryDeadLetters(t); err != nil {
			return err
		}
	}
	return nil
}

// retryDeadLetters hands tab t's dead letters to the operator's runner,
// oldest event first: events to HandleStored, records to sagaharness.SendStored; a
// record that is not one (the foreign event, the damaged copy) is
// dropped. Each is deleted once taken.
func (w *tabWorld) retryDeadLetters(t *tab) error {
	r := w.o.runner
	for _, consumer := range []string{eventsConsumer(r), outboxConsumer(r)} {
		var mine []eventstore.DeadLetter
		for d, err := range w.checkpoints.DeadLetters(w.ctx, consumer) {
			if err != nil {
				return err
			}
			if w.tabOf(d.Event) == t {
				mine = append(mine, d)
			}
		}
		slices.SortFunc(mine, func(a, b eventstore.DeadLetter) int { return a.Event.Position.Compare(b.Event.Position) })
		for _, d := range mine {
			err := ErrInjected
			for attempt := 0; errors.Is(err, ErrInjected) && attempt < 20; attempt++ {
				if consumer == eventsConsumer(r) {
					_, err = r.HandleStored(w.ctx, d.Event)
				} else {
					err = sagaharness.SendStored(r)(w.ctx, d.Event)
				}
			}
			switch {
			case err == nil, consumer == outboxConsumer(r) && d.Event.Version == t.damaged:
			default:
				w.violate("operator: retrying the dead letter %s#%d failed: %v", d.Event.StreamID, d.Event.Version, err)
			}
			w.tracef("operator: took the dead letter %s#%d of %s", d.Event.StreamID, d.Event.Version, consumer)
			if err := w.checkpoints.DeleteDeadLetter(w.ctx, consumer, d.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// uuid is a deterministic event ID of this seed.
func (w *tabWorld) uuid(parts ...string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%d/%s", w.cfg.Seed, strings.Join(parts, "/")))
}
