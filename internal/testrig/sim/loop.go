package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/internal/sagaharness"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
)

// Limits of a run.
const (
	// faultTicks is how long faults go on after the last order is placed.
	faultTicks = 60
	// drainTicks bounds the drain: a run that is not quiet by then fails
	// its liveness check.
	drainTicks = 400
	// perTick bounds the deliveries of one source in one tick.
	perTick = 500
	// opTime is how far the clock moves for each operation, so that no two
	// steps share an instant and deadlines never tie.
	opTime = time.Millisecond
)

// run runs the workload under faults, then stops the faults and drains.
func (w *world) run() error {
	last := 0
	for _, o := range w.orders {
		last = max(last, o.placeAt)
	}
	for w.tick = 0; w.tick <= last+faultTicks; w.tick++ {
		if err := w.step(w.jump()); err != nil {
			return err
		}
	}
	return w.drain()
}

// step is one tick: time moves, the process may crash or restart parts of
// itself, orders are placed, and every component gets its turn.
func (w *world) step(d time.Duration) error {
	w.clock.Advance(d)
	if f, _ := w.inj.fault(CrashIdle); f {
		if err := w.crash("idle"); err != nil {
			return err
		}
	}
	if f, _ := w.inj.fault(RestartOutbox); f {
		w.tracef("outbox restarts")
		w.outbox.reset()
	}
	if f, _ := w.inj.fault(RestartBridge); f {
		w.tracef("bridge restarts")
		w.bridge.reset()
	}
	for _, work := range []func() error{w.place, w.observe, w.deliverStored, w.deliverExternal, w.send, w.fire, w.saveBridge} {
		if err := work(); err != nil {
			return err
		}
	}
	return nil
}

// place dispatches the orders due by now that are not placed yet; one that
// fails is placed again next tick, with the same command ID.
func (w *world) place() error {
	for _, o := range w.orders {
		if o.placed || o.placeAt > w.tick {
			continue
		}
		w.op()
		_, err := w.proc.bus.Dispatch(w.ctx, command.Message{ID: "place-" + o.id,
			Command: domain.PlaceOrder{OrderID: o.id, Seats: o.in.Seats, AmountCents: o.in.AmountCents}})
		if err != nil {
			if _, err := w.failed("place "+o.id, err, CrashStep); err != nil {
				return err
			}
			continue
		}
		o.placed = true
		w.tracef("place %s seats=%d amount=%d settled=%v", o.id, o.in.Seats, o.in.AmountCents, o.in.Settled)
	}
	return nil
}

// observe reads what was stored since it last looked, as the world
// outside the process sees it: the payment provider learns of the payments
// left pending, and schedules its messages.
func (w *world) observe() error {
	for ev, err := range w.mem.ReadAll(w.ctx, w.observed, eventstore.Filter{Types: []string{"rig-payment.pending"}}) {
		if err != nil {
			return err
		}
		w.observed = ev.Position
		o := w.byID[ev.StreamID[len(reservation.Payments.Stream("")):]]
		if o != nil && o.in.Settled {
			w.psp.settle(w, o)
		}
	}
	return nil
}

// send is the outbox dispatcher's turn.
func (w *world) send() error {
	r := w.proc.runner
	return w.sendRecords(&w.outbox, w.sale.Category(), outboxConsumer(r), sagaharness.SendStored(r), nil)
}

// sendRecords is an outbox dispatcher's turn: it sends the step records
// of category stored after its cursor, in log order, and stops at the
// first failure, to retry it next tick; then it saves its checkpoint under
// consumer. park, when set, keeps a record that concerns one instance only
// as a dead letter, as the runner's own outbox does, and goes on.
func (w *base) sendRecords(ob *outbox, category, consumer string, send func(context.Context, eventstore.Event) error,
	park func(ev eventstore.Event, err error) (bool, error)) error {
	if f, _ := w.inj.fault(Stall); f && !w.draining {
		return nil
	}
	if err := ob.load(w, consumer); err != nil {
		return err
	}
	var records []eventstore.Event
	for ev, err := range w.mem.ReadAll(w.ctx, ob.cursor, eventstore.Filter{StreamPrefixes: []string{category}}) {
		if err != nil {
			return err
		}
		records = append(records, ev)
	}
	for _, ev := range records {
		w.op()
		what := fmt.Sprintf("send %s#%d", ev.StreamID, ev.Version)
		if err := send(w.ctx, ev); err != nil {
			parked := false
			if park != nil {
				var perr error
				if parked, perr = park(ev, err); perr != nil {
					return perr
				}
			}
			if !parked {
				_, err := w.failed(what, err, CrashSend)
				return err
			}
			w.tracef("%s: dead letter: %v", what, err)
		}
		ob.cursor = ev.Position
		w.tracef("sent %s#%d", ev.StreamID, ev.Version)
	}
	return w.saveCheckpoint(consumer, ob.cursor)
}

// fire is the deadline scheduler's turn.
func (w *world) fire() error { return w.fireDue(w.proc.runner.FireDue) }

// fireDue is a deadline scheduler's turn: it fires what is due.
func (w *base) fireDue(fire func(context.Context) (int, error)) error {
	if f, _ := w.inj.fault(Stall); f && !w.draining {
		return nil
	}
	w.op()
	n, err := fire(w.ctx)
	if n > 0 {
		w.tracef("fired %d deadlines", n)
	}
	if err != nil {
		_, err := w.failed("fire", err, CrashFire)
		return err
	}
	return nil
}

// drain stops the faults and lets the system settle: ticks of a few
// seconds until a tick changes nothing, then time moves past every
// deadline and every provider message, until that changes nothing either.
func (w *world) drain() error {
	w.inj.on, w.draining = false, true
	w.tracef("faults stop")
	for end, quiet := w.tick+drainTicks, 0; w.tick < end; w.tick++ {
		before := w.logLength()
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
		if !w.timeLeft() {
			return nil
		}
		w.clock.Advance(reservation.PaymentWindow + 10*time.Minute)
		quiet = 0
	}
	w.violate("liveness: the system was still busy %d ticks after the faults stopped", drainTicks)
	return nil
}

// settled reports that nothing is in flight: every stored event and
// provider message delivered, every placed order placed.
func (w *world) settled() bool {
	for _, o := range w.orders {
		if !o.placed {
			return false
		}
	}
	return len(w.bridge.pool) == 0 && len(w.psp.pool) == 0
}

// timeLeft reports whether moving time could still change something: a
// provider message not yet due, or a deadline not yet fired.
func (w *world) timeLeft() bool {
	if len(w.psp.scheduled) > 0 {
		return true
	}
	st, err := w.proc.runner.Stats(w.ctx)
	return err != nil || st.DeadlinesPending > 0
}
