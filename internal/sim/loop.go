package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/reservation"
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

// jump is how far the clock moves at the start of a tick: mostly seconds,
// sometimes minutes, now and then most of a payment window, so that some
// payments miss their deadline.
func (w *world) jump() time.Duration {
	switch p := w.work.IntN(100); {
	case p < 70:
		return time.Duration(5+w.work.IntN(35)) * time.Second
	case p < 95:
		return time.Duration(60+w.work.IntN(180)) * time.Second
	default:
		return time.Duration(6+w.work.IntN(12)) * time.Minute
	}
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

// op moves the clock for one operation.
func (w *world) op() { w.clock.Advance(opTime) }

// place dispatches the orders due by now that are not placed yet; one that
// fails is placed again next tick, with the same command ID.
func (w *world) place() error {
	for _, o := range w.orders {
		if o.placed || o.placeAt > w.tick {
			continue
		}
		w.op()
		_, err := w.proc.bus.Dispatch(w.ctx, command.Message{ID: "place-" + o.id,
			Command: reservation.PlaceOrder{OrderID: o.id, Seats: o.in.Seats, Amount: o.in.Amount}})
		if err != nil {
			if _, err := w.failed("place "+o.id, err, CrashStep); err != nil {
				return err
			}
			continue
		}
		o.placed = true
		w.tracef("place %s seats=%d amount=%d settled=%v", o.id, o.in.Seats, o.in.Amount, o.in.Settled)
	}
	return nil
}

// observe reads what was stored since it last looked, as the world
// outside the process sees it: the payment provider learns of the payments
// left pending, and schedules its messages.
func (w *world) observe() error {
	for ev, err := range w.mem.ReadAll(w.ctx, w.observed, eventstore.Filter{Types: []string{"payment.pending"}}) {
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

// send is the outbox dispatcher's turn: it sends the step records stored
// after its cursor, in log order, and stops at the first failure, to
// retry it next tick; then it saves its checkpoint.
func (w *world) send() error {
	if f, _ := w.inj.fault(Stall); f && !w.draining {
		return nil
	}
	if err := w.outbox.load(w); err != nil {
		return err
	}
	var records []eventstore.Event
	for ev, err := range w.mem.ReadAll(w.ctx, w.outbox.cursor, eventstore.Filter{StreamPrefixes: []string{w.sale.Category()}}) {
		if err != nil {
			return err
		}
		records = append(records, ev)
	}
	for _, ev := range records {
		w.op()
		if err := w.proc.runner.SendStored(w.ctx, ev); err != nil {
			_, err := w.failed(fmt.Sprintf("send %s#%d", ev.StreamID, ev.Version), err, CrashSend)
			return err
		}
		w.outbox.cursor = ev.Position
		w.tracef("sent %s#%d", ev.StreamID, ev.Version)
	}
	return w.saveCheckpoint(w.proc.runner.OutboxConsumer(), w.outbox.cursor)
}

// fire is the deadline scheduler's turn.
func (w *world) fire() error {
	if f, _ := w.inj.fault(Stall); f && !w.draining {
		return nil
	}
	w.op()
	n, err := w.proc.runner.FireDue(w.ctx)
	if n > 0 {
		w.tracef("fired %d deadlines", n)
	}
	if err != nil {
		_, err := w.failed("fire", err, CrashFire)
		return err
	}
	return nil
}

// saveCheckpoint moves a consumer's checkpoint to pos, from where the
// store has it; a failed save is tried again at the next one.
func (w *world) saveCheckpoint(name string, pos eventstore.Position) error {
	cp, err := w.checkpoints.Checkpoint(w.ctx, name)
	if err != nil {
		return err
	}
	if cp.Position == pos {
		return nil
	}
	if err := w.checkpoints.SaveCheckpoint(w.ctx, name, cp.Position, pos, 0); err != nil {
		w.tracef("checkpoint %s: error: %v", name, err)
		if !errors.Is(err, ErrInjected) {
			w.violate("checkpoint %s failed on its own: %v", name, err)
		}
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

// logLength returns the position of the last event stored.
func (w *world) logLength() eventstore.Position {
	for ev := range w.mem.ReadAll(w.ctx, w.logEnd, eventstore.Filter{}) {
		w.logEnd = ev.Position
	}
	return w.logEnd
}
