package sagatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/saga"
)

// Stores are what a saga runs on: an event store, and a store of its
// consumers' checkpoints and dead letters (often the same store).
type Stores struct {
	Events    eventstore.Store
	Consumers ConsumerStore
}

// ConsumerStore keeps a runner's checkpoints and dead letters.
type ConsumerStore interface {
	storekit.CheckpointStore
	storekit.DeadLetterStore
}

// Factory returns fresh stores for one test, and registers their cleanup
// with t.Cleanup.
type Factory func(t testing.TB) Stores

// Run is the saga conformance suite: a flow of its own (orders, their
// payments and the sale that coordinates them) on the stores
// that newStores makes, with the checks every store must pass: each order
// ends as its inputs dictate, each command takes effect once, redelivered
// events are absorbed, two runners at once make one effect, and deadlines
// outlive a restart.
func Run(t *testing.T, newStores Factory) {
	for _, c := range []struct {
		name string
		run  func(t testing.TB, f *flow)
	}{
		{"FlowEndsAsExpected", testFlowEnds},
		{"RedeliveredEventsAreAbsorbed", testRedelivered},
		{"TwoRunnersMakeOneEffect", testTwoRunners},
		{"DeadlinesOutliveARestart", testDeadlineRestart},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newFlow(t, newStores(t))) })
	}
}

// flow is the suite's flow (see conformanceflow.go) on one set of stores.
type flow struct {
	Stores
	log    *slog.Logger
	reg    *codec.Registry
	bus    *command.Bus
	clock  *Clock
	orders []order
	// The aggregates the flow's commands go to, to check how orders end.
	orderRepo   *aggregate.Repository[orderState, *orderState]
	paymentRepo *aggregate.Repository[paymentState, *paymentState]
}

type order struct {
	id     string
	amount int
}

func newFlow(t testing.TB, s Stores) *flow {
	f := &flow{Stores: s, reg: codec.NewRegistry(codec.Options{}), clock: NewClock(Start)}
	f.bus = command.New(s.Events, f.reg, command.Options{})
	orders, oerr := aggregate.NewType[orderState]("order", aggregate.Options[orderState]{}, orderBindings()...)
	payments, perr := aggregate.NewType[paymentState]("payment", aggregate.Options[paymentState]{}, paymentBindings()...)
	if err := errors.Join(oerr, perr); err != nil {
		t.Fatal(err)
	}
	if err := registerFlow(f.reg, f.bus, orders, payments); err != nil {
		t.Fatal(err)
	}
	var errs [2]error
	f.orderRepo, errs[0] = aggregate.NewRepository(s.Events, f.reg, orders, aggregate.RepositoryOptions{})
	f.paymentRepo, errs[1] = aggregate.NewRepository(s.Events, f.reg, payments, aggregate.RepositoryOptions{})
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	return f
}

// runner returns a new runner of the sale on the flow's stores, as a new
// process would make it.
func (f *flow) runner(t testing.TB) *saga.Runner[sale] {
	t.Helper()
	typ, err := newSale(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := saga.NewRunner(typ, f.Events, f.bus, saga.RunnerOptions{Clock: f.clock, Checkpoints: f.Consumers,
		Logger: f.logger(), MaxBatchDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// place places n orders whose amounts cover every outcome.
func (f *flow) place(t testing.TB, prefix string, n int) {
	t.Helper()
	for i := range n {
		o := order{id: fmt.Sprintf("%s-%d", prefix, i), amount: 100 + 97*i}
		f.orders = append(f.orders, o)
		if _, err := f.bus.Dispatch(context.Background(), command.Message{ID: "place-" + o.id,
			Command: placeOrder{OrderID: o.id, Amount: o.amount}}); err != nil {
			t.Fatalf("placing order %s: %v", o.id, err)
		}
	}
}

// check checks that every order stands as its inputs dictate, with exactly
// the events that make it so: none twice. withDeadlines says whether the
// payment deadline has had time to fire.
func (f *flow) check(t testing.TB, withDeadlines bool) {
	t.Helper()
	ctx := context.Background()
	for _, o := range f.orders {
		if got, want := f.standing(t, o.id), expect(o.amount, withDeadlines); got != want {
			t.Errorf("order %s (amount %d): got %+v, want %+v", o.id, o.amount, got, want)
		}
		// Each command took effect once: an order has at most placed and
		// one end, a payment at most pending and voided (a refused charge
		// leaves the bus's record of the rejection).
		for stream, most := range map[string]int{"order-" + o.id: 2, "payment-" + o.id: 2} {
			n := 0
			for _, err := range f.Events.ReadStream(ctx, stream, eventstore.Forward(0)) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n > most {
				t.Errorf("stream %s holds %d events, more than the %d the flow makes once", stream, n, most)
			}
		}
	}
}

func catchUp(t testing.TB, r *saga.Runner[sale]) {
	t.Helper()
	if err := r.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func testFlowEnds(t testing.TB, f *flow) {
	r := f.runner(t)
	f.place(t, "a", 36)
	catchUp(t, r)
	f.check(t, false)
	f.clock.Advance(paymentWindow)
	catchUp(t, r)
	f.check(t, true)
	st, err := r.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadlinesPending != 0 {
		t.Errorf("%d deadlines still pending after the flow ended", st.DeadlinesPending)
	}
}

func testRedelivered(t testing.TB, f *flow) {
	r := f.runner(t)
	f.place(t, "b", 24)
	catchUp(t, r)
	f.clock.Advance(paymentWindow)
	catchUp(t, r)
	f.check(t, true)

	// Every event and record delivered again, as after a crash that lost
	// both checkpoints: nothing changes.
	ctx := context.Background()
	for _, name := range []string{eventsConsumer(r), outboxConsumer(r)} {
		cp, err := f.Consumers.Checkpoint(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Consumers.SaveCheckpoint(ctx, name, cp.Position, eventstore.Start, cp.Fence); err != nil {
			t.Fatal(err)
		}
	}
	again := f.runner(t)
	catchUp(t, again)
	f.check(t, true)
	st, err := again.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Handled != 0 {
		t.Errorf("redelivered events ran %d handlers", st.Handled)
	}
	if st.Duplicates == 0 && st.Ignored == 0 {
		t.Error("no redelivered event was counted as a duplicate")
	}
}

func testTwoRunners(t testing.TB, f *flow) {
	logs := &lockedWriter{}
	f.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 { // staging and production, both consuming
		r := f.runner(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.Run(ctx)
		}()
	}
	f.place(t, "c", 30)
	deadline := time.Now().Add(2 * time.Minute)
	for !f.ended(t, false) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.clock.Advance(paymentWindow)
	for !f.ended(t, true) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("runner: %v", err)
		}
	}
	if !f.ended(t, true) {
		f.explainUnsettled(t)
	}
	f.check(t, true)
}

// explainUnsettled reports, for a test that failed, the saga instances of
// the orders that did not end.
func (f *flow) explainUnsettled(t testing.TB) {
	r := f.runner(t)
	for _, o := range f.orders {
		x, err := r.Explain(context.Background(), o.id)
		if err != nil {
			t.Errorf("explaining %s: %v", o.id, err)
			continue
		}
		if !x.Completed {
			cp, _ := f.Consumers.Checkpoint(context.Background(), outboxConsumer(r))
			ecp, _ := f.Consumers.Checkpoint(context.Background(), eventsConsumer(r))
			var pays []string
			for e, err := range f.Events.ReadStream(context.Background(), "payment-"+o.id, eventstore.Forward(0)) {
				if err == nil {
					pays = append(pays, e.Type+"@"+e.Position.String())
				}
			}
			t.Logf("instance %s: outbox at %s, events at %s, payment events %v", o.id, cp.Position, ecp.Position, pays)
			for st, err := range r.History(context.Background(), o.id) {
				if err == nil && len(st.Commands) > 0 {
					t.Logf("instance %s step %d (%s) at %s sent %d commands; outbox checkpoint %s", o.id, st.Version, st.Kind, st.Recorded, len(st.Commands), cp.Position)
				}
			}
		}
		if !x.Completed {
			t.Errorf("instance %s did not complete: version %d, last step %+v, deadlines %+v, held %+v, parked %+v",
				o.id, x.Version, x.LastStep, x.Deadlines, x.Held, x.Parked)
		}
	}
}

// ended reports whether every order stands as its inputs dictate: ended,
// or, unless withDeadlines, waiting for its payment deadline with its
// payment pending (the step that sets the deadline also sends the charge,
// so the deadline is set before the clock moves).
func (f *flow) ended(t testing.TB, withDeadlines bool) bool {
	t.Helper()
	for _, o := range f.orders {
		if f.standing(t, o.id) != expect(o.amount, withDeadlines) {
			return false
		}
	}
	return true
}

// standing returns how order id stands.
func (f *flow) standing(t testing.TB, id string) outcome {
	t.Helper()
	ctx := context.Background()
	oi, err := f.orderRepo.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := f.paymentRepo.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return outcome{ended: oi.State.ended, reason: oi.State.reason,
		taken: pi.State.taken, pending: pi.State.pending, voided: pi.State.voided}
}

func testDeadlineRestart(t testing.TB, f *flow) {
	before := f.runner(t)
	f.place(t, "d", 14) // orders 2 and 9 wait for their payment deadline
	catchUp(t, before)
	// The process stops; a new one starts, and later the deadlines fall due.
	after := f.runner(t)
	f.clock.Advance(paymentWindow)
	catchUp(t, after)
	f.check(t, true)
}

func (f *flow) logger() *slog.Logger {
	if f.log != nil {
		return f.log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type lockedWriter struct {
	mu sync.Mutex
	b  []byte
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// eventsConsumer and outboxConsumer name the consumers of a runner of one
// segment.
func eventsConsumer[S any](r *saga.Runner[S]) string {
	events, _, _ := r.Consumers(0)
	return events
}

func outboxConsumer[S any](r *saga.Runner[S]) string {
	_, outbox, _ := r.Consumers(0)
	return outbox
}
