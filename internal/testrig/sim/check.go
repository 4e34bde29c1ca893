package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
	"github.com/cairn-es/cairn/saga"
)

// sentBy says which order's instance sent a command, and what it was.
type sentBy struct {
	order, typ string
	// superseded: recorded by a step that a later Redrive ran again, whose
	// run did not record it again (the fixed code no longer sends it). It
	// took effect if the outbox had dispatched it before, or at most once.
	superseded bool
}

// check runs the checks of a finished run: each order's end against its
// inputs, each instance's history, and each command's effects.
func (w *world) check() error {
	checker, err := reservation.NewChecker(w.mem, w.reg)
	if err != nil {
		return err
	}
	sent := make(map[string]sentBy)
	for _, o := range w.orders {
		if !o.placed {
			w.violate("liveness: order %s was never placed", o.id)
			continue
		}
		sent["place-"+o.id] = sentBy{order: o.id, typ: "reservation.place-order"}
		var steps []saga.Step
		for s, err := range w.proc.runner.History(w.ctx, o.id) {
			if err != nil {
				return err
			}
			steps = append(steps, s)
			for _, c := range s.Commands {
				sent[c.ID] = sentBy{order: o.id, typ: c.Type}
			}
		}
		w.stats.Steps += len(steps)
		x, err := w.proc.runner.Explain(w.ctx, o.id)
		if err != nil {
			return err
		}
		for _, c := range x.Unsent {
			w.violate("liveness: instance %s: command %s (%s) was never confirmed sent", o.id, c.ID, c.Type)
		}
		switch {
		case x.Completed:
		case x.Parked != nil && x.Parked.Error != "":
			w.violate("order %s: parked: %s", o.id, x.Parked.Error)
		default:
			w.violate("liveness: instance %s is neither complete nor parked (%d steps, %d held, %d deadlines pending)",
				o.id, len(steps), len(x.Held), len(x.Deadlines))
		}
		in := o.in
		in.TimedOut = w.checkSteps(o, steps)
		problems, err := checker.Check(w.ctx, o.id, in)
		if err != nil {
			return err
		}
		for _, p := range problems {
			w.violate("safety: %s (inputs %+v)", p, in)
		}
		w.count(in)
	}
	return w.checkCommands(sent)
}

// count adds an order's end to the figures.
func (w *world) count(in reservation.Inputs) {
	w.stats.Orders++
	want := in.Expect()
	if want.Confirmed {
		w.stats.Confirmed++
	} else {
		w.stats.Rejected++
	}
	if in.TimedOut {
		w.stats.TimedOut++
	}
	if in.Settled && in.Seats <= domain.MaxSeats {
		if in.TimedOut {
			w.stats.SettledLate++
		} else {
			w.stats.SettledInTime++
		}
	}
}

// checkSteps checks an instance's history, and returns whether its
// payment deadline fired: that is how the clock decided the race between
// the deadline and the payment.
//
//   - Each source's messages were handled in its order, each once: the
//     sequences handled per source rise strictly, and no stored event's
//     ID is handled twice.
//   - Each deadline fired at most once, never before it was due, and
//     never after it was cancelled: in this flow a handled payment
//     cancels it, and completion drops every pending deadline.
//   - Nothing happened after the instance completed but the outcomes of
//     the commands its completing step sent.
func (w *world) checkSteps(o *order, steps []saga.Step) (timedOut bool) {
	bad := func(i int, format string, args ...any) {
		w.violate("safety: order %s, step %d: %s", o.id, i, fmt.Sprintf(format, args...))
	}
	marks := make(map[string]uint64)
	handled := make(map[uuid.UUID]int)
	fired := make(map[string]bool)
	completed, paid, reserved := -1, -1, -1
	sentAt := make(map[string]int)
	for i, s := range steps {
		for _, c := range s.Commands {
			sentAt[c.ID] = i
		}
		if at, ok := sentAt[s.Command]; completed >= 0 && (s.Command == "" || !ok || at < completed) {
			bad(i, "a %s step after the instance completed at step %d", s.Kind, completed)
		}
		switch s.Kind {
		case "held":
			w.stats.ReordersRepaired++
		case "event", "rejected":
			if last, seen := marks[s.Source]; seen && s.Sequence <= last {
				bad(i, "%s #%d of %q handled after #%d: out of its source's order, or twice", s.Type, s.Sequence, s.Source, last)
			}
			marks[s.Source] = s.Sequence
			if s.EventID != uuid.Nil {
				if j, twice := handled[s.EventID]; twice {
					bad(i, "event %s (%s) handled again, first at step %d", s.EventID, s.Type, j)
				}
				handled[s.EventID] = i
			}
			switch s.Type {
			case "seats.reserved":
				reserved = i
			case "rig-payment.accepted":
				paid = i
			}
		case "deadline":
			switch {
			case fired[s.Deadline]:
				bad(i, "deadline %s fired twice", s.Deadline)
			case paid >= 0:
				bad(i, "deadline %s fired after the payment at step %d cancelled it", s.Deadline, paid)
			case reserved < 0:
				bad(i, "deadline %s fired, and no step scheduled it", s.Deadline)
			case s.At.Before(steps[reserved].At.Add(reservation.PaymentWindow)):
				bad(i, "deadline %s fired at +%s, before it was due at +%s", s.Deadline, s.At.Sub(w.start),
					steps[reserved].At.Add(reservation.PaymentWindow).Sub(w.start))
			}
			fired[s.Deadline] = true
			timedOut = true
		}
		if s.Completed && completed < 0 {
			completed = i
		}
	}
	return timedOut
}

// checkCommands accounts for every command: each one sent took effect
// exactly once (one event, as every command of this flow has, or, when its
// aggregate refused it, one recorded rejection), and nothing took effect
// that no one sent.
func (w *world) checkCommands(sent map[string]sentBy) error {
	effects := make(map[string][]string)
	refusals := make(map[string]int)
	for ev, err := range w.mem.ReadAll(w.ctx, eventstore.Start, eventstore.Filter{}) {
		if err != nil {
			return err
		}
		if strings.HasPrefix(ev.StreamID, saga.StreamPrefix) {
			continue
		}
		id := ev.Metadata.CommandID
		effects[id] = append(effects[id], fmt.Sprintf("%s#%d %s", ev.StreamID, ev.Version, ev.Type))
		if busrepo.IsRejection(&ev) {
			refusals[id]++
		}
	}
	c := &w.stats.Commands
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		by, tracked := sent[id], w.cmds[id]
		what := fmt.Sprintf("command %s (%s of order %s)", id, by.typ, by.order)
		c.Attempted++
		if tracked != nil && tracked.acknowledged {
			c.Acknowledged++
		} else {
			w.violate("liveness: %s was never acknowledged", what)
		}
		rejected := tracked != nil && tracked.rejected
		switch stored := effects[id]; {
		case len(stored) == 0:
			c.Lost++
			w.violate("safety: %s took no effect", what)
		case len(stored) > 1:
			c.Applied++
			c.Duplicated++
			w.violate("safety: %s took effect %d times: %v", what, len(stored), stored)
		case rejected != (refusals[id] == 1):
			c.Applied++
			w.violate("safety: %s: the bus answered rejected=%v, and the store holds %v", what, rejected, stored)
		default:
			c.Applied++
		}
	}
	unsent := make([]string, 0)
	for id := range effects {
		if _, ok := sent[id]; !ok {
			unsent = append(unsent, id)
		}
	}
	slices.Sort(unsent)
	for _, id := range unsent {
		if stored := effects[id]; true {
			c.Unexpected += len(stored)
			w.violate("safety: events %v carry command ID %q, which no one sent", stored, id)
		}
	}
	return nil
}
