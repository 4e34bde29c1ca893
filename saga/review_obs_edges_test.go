package saga_test

// Edges of the tracing and metrics of issue 27 that the review tried and
// found holding: these pass.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// Passing edge: instances parked by one process are counted by the
// cairn.saga.parked gauge of the next (a restart), once it runs; and
// restarting runners many times leaves no gauge callbacks behind, neither
// the saga's nor its consumers' lag gauges, once they are dropped.
func TestReviewSagaGaugesAcrossRestartsAndNoLeftovers(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	rec := oteltest.New(t)
	var broken atomic.Bool
	newRunner := reviewGates(t, store, rec, &broken)
	broken.Store(true)
	first := newRunner()
	for _, id := range []string{"a", "b"} {
		out, err := first.Deliver(context.Background(), saga.Delivery{Source: "knocks-" + id, Event: Knock{ID: id}})
		require.NoError(t, err)
		require.Equal(t, saga.Parked, out)
	}
	runtime.KeepAlive(first)

	for i := range 5 {
		func() {
			r := newRunner()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			require.Eventually(t, func() bool {
				n, ok := rec.Int64(t, "cairn.saga.parked", telemetry.SagaTypeKey.String("gate"))
				return ok && n == 2
			}, 5*time.Second, 5*time.Millisecond, "restart %d: the parked instances are counted", i)
			_, lag := rec.Int64(t, "cairn.consumer.lag")
			assert.True(t, lag, "the runner's consumers report their lag while it runs")
			cancel()
			require.NoError(t, <-done)
		}()
	}
	_, ok := rec.Int64(t, "cairn.saga.parked", telemetry.SagaTypeKey.String("gate"))
	assert.False(t, ok, "no runner runs")
	require.Eventually(t, func() bool {
		runtime.GC()
		for _, sm := range rec.Collect(t).ScopeMetrics {
			for _, m := range sm.Metrics {
				if strings.HasPrefix(m.Name, "cairn.consumer.") || strings.HasPrefix(m.Name, "cairn.saga.") && m.Name != "cairn.saga.steps" {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "gauges of dropped runners are still observed")
}

// Passing edge: every span a saga step starts ends, on its error paths: a
// step record the store fails to append, a handler that panics (parked),
// a cancelled context, and a Run stopped while it works.
func TestReviewEverySagaSpanEndsOnEveryErrorPath(t *testing.T) {
	tp, spans := oteltest.Counting(t)
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{event: func(_ context.Context, s *edgeState, e edgeEvent, _ *saga.Output) error {
		if e.Text == "panic" {
			panic("handler bug")
		}
		s.Seen = append(s.Seen, e.Text)
		return nil
	}})
	store := newEdgeStore(g.store)
	r := g.runner(t, store, saga.RunnerOptions{TracerProvider: tp})

	store.failAppend("saga:edge-1", 0)
	_, err := r.Deliver(ctx, saga.Delivery{Source: "s", Sequence: 0, Event: edgeEvent{ID: "1", Text: "start"}})
	require.ErrorIs(t, err, errEdgeStoreDown)
	out, err := r.Deliver(ctx, saga.Delivery{Source: "s", Sequence: 0, Event: edgeEvent{ID: "1", Text: "start"}})
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	out, err = r.Deliver(ctx, saga.Delivery{Source: "s", Sequence: 1, Event: edgeEvent{ID: "1", Text: "panic"}})
	require.NoError(t, err)
	require.Equal(t, saga.Parked, out)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = r.Deliver(cancelled, saga.Delivery{Source: "s2", Sequence: 0, Event: edgeEvent{ID: "2", Text: "start"}})
	t.Logf("cancelled Deliver: %v", err)

	g.put(t, "edge-3", edgeEvent{ID: "3", Text: "start"})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	require.Eventually(t, func() bool { return len(edgeSeen(t, r, "3")) > 0 }, 5*time.Second, 5*time.Millisecond)
	stop()
	require.NoError(t, <-done)
	assert.Empty(t, spans.Names(), "spans left open")
}

// Passing edge: a delivery redelivered to another runner (a crash after
// the append, a broker's redelivery) is a duplicate: one record, which
// keeps the first step's append context; the steps counter and the step
// spans say handled once and duplicate once.
func TestReviewARedeliveredStepKeepsTheFirstContext(t *testing.T) {
	rec := oteltest.New(t)
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{})
	opts := saga.RunnerOptions{TracerProvider: rec.TracerProvider, MeterProvider: rec.MeterProvider}
	first, second := g.runner(t, nil, opts), g.runner(t, nil, opts)
	d := saga.Delivery{Source: "s", Sequence: 0, Event: edgeEvent{ID: "1", Text: "start"}}
	out, err := first.Deliver(ctx, d)
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	out, err = second.Deliver(ctx, d)
	require.NoError(t, err)
	require.Equal(t, saga.Duplicate, out)

	appends := rec.Named("append saga:edge")
	require.NotEmpty(t, appends)
	var records []eventstore.Event
	for ev, err := range g.store.ReadStream(context.Background(), "saga:edge-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		records = append(records, ev)
	}
	require.Len(t, records, 1)
	assert.Equal(t, appends[0].SpanContext().SpanID(), telemetry.SpanContextOf(records[0].Metadata).SpanID())
	typ := telemetry.SagaTypeKey.String("edge")
	handled, _ := rec.Int64(t, "cairn.saga.steps", typ, telemetry.OutcomeKey.String("handled"))
	dup, _ := rec.Int64(t, "cairn.saga.steps", typ, telemetry.OutcomeKey.String("duplicate"))
	assert.EqualValues(t, 1, handled)
	assert.EqualValues(t, 1, dup)
	outcomes := map[string]int{}
	for _, s := range rec.Named("step edge") {
		v, _ := oteltest.Attr(s, telemetry.OutcomeKey)
		outcomes[v.AsString()]++
	}
	assert.Equal(t, map[string]int{"handled": 1, "duplicate": 1}, outcomes)
}

// Passing edge: a whole flow in one process (an event appended under a
// span, the runner's step, its outbox's send, the bus's dispatch and
// append) leaves no orphan span, and the dispatch runs under the send.
func TestReviewAFlowInOneProcessHasNoOrphanSpans(t *testing.T) {
	f := newTracedFixture(t)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(f.store, f.reg, command.Options{TracerProvider: f.rec.TracerProvider, MeterProvider: f.rec.MeterProvider})
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	require.NoError(t, command.Route[MakePayment](bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](bus, orders))
	r, err := saga.NewRunner(f.sale, f.store, bus, saga.RunnerOptions{Clock: f.clock, Logger: testLogger(t),
		TracerProvider: f.rec.TracerProvider, MeterProvider: f.rec.MeterProvider, MaxBatchDelay: time.Millisecond})
	require.NoError(t, err)

	_, origin := f.rec.TracerProvider.Tracer("test").Start(context.Background(), "place order")
	f.appendTraced(t, origin, "order-1", OrderPlaced{OrderID: "1"})
	origin.End()
	ctx, stop := context.WithCancel(edgeContext(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool { return len(f.rec.Named("dispatch make.reservation")) > 0 }, 10*time.Second, 5*time.Millisecond)
	stop()
	require.NoError(t, <-done)

	ended := f.rec.Ended()
	for _, o := range oteltest.Orphans(ended) {
		t.Errorf("orphan span %q (parent %s)", o.Name(), o.Parent().SpanID())
	}
	sends := f.rec.Named("send make.reservation")
	require.NotEmpty(t, sends)
	d := f.rec.Named("dispatch make.reservation")[0]
	assert.Equal(t, sends[0].SpanContext().SpanID(), d.Parent().SpanID(), "the dispatch runs under the send")
	assert.NotEmpty(t, oteltest.Reachable(ended, origin.SpanContext().SpanID()))
}

// Passing edge: a delivery's metadata that carries a trace context of its
// own (forged, or a broker's header copied as is) is refused, or never
// becomes the record's context nor a link of the step, held or not.
func TestReviewADeliveryCannotForgeTheRecordsTraceContext(t *testing.T) {
	rec := oteltest.New(t)
	ctx := edgeContext(t)
	g := newEdgeRig(t, edgeOnMemory, edgeHooks{})
	r := g.runner(t, nil, saga.RunnerOptions{TracerProvider: rec.TracerProvider})
	forged := "00-0badc0ffee0badc0ffee0badc0ffee0-0badc0ffee0badc0-01"
	md := eventstore.Metadata{Extra: map[string]string{eventstore.TraceParentKey: forged}}
	// Sequence 1 first: held behind the gap, then released by 0.
	for _, seq := range []uint64{1, 0} {
		_, err := r.Deliver(ctx, saga.Delivery{Source: "s", Sequence: seq, Event: edgeEvent{ID: "1", Text: fmt.Sprint("m", seq)}, Metadata: md})
		if err != nil {
			require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
			return
		}
	}
	for ev, err := range g.store.ReadStream(context.Background(), "saga:edge-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		assert.NotEqual(t, forged, ev.Metadata.Extra[eventstore.TraceParentKey], "record %d", ev.Version)
	}
	for _, s := range rec.Ended() {
		for _, l := range s.Links() {
			assert.NotEqual(t, "0badc0ffee0badc0ffee0badc0ffee0", l.SpanContext.TraceID().String(), "span %q links to the forged context", s.Name())
		}
		assert.NotEqual(t, "0badc0ffee0badc0ffee0badc0ffee0", s.SpanContext().TraceID().String(), "span %q", s.Name())
	}
}

// Passing edge: the outbox sending a recorded command again (a runner
// that crashed after the send, before marking it sent, then another
// runner) dispatches a duplicate: the command's effect is stored once,
// with the first dispatch's context, and the second send says duplicate.
func TestReviewAnOutboxResendIsADuplicateThatKeepsTheFirstContext(t *testing.T) {
	f := newTracedFixture(t)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	bus := command.New(f.store, f.reg, command.Options{TracerProvider: f.rec.TracerProvider, MeterProvider: f.rec.MeterProvider})
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	require.NoError(t, command.Route[MakePayment](bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](bus, orders))
	runner := func() *saga.Runner[Sale] {
		r, err := saga.NewRunner(f.sale, f.store, bus, saga.RunnerOptions{Clock: f.clock, Logger: testLogger(t),
			TracerProvider: f.rec.TracerProvider, MeterProvider: f.rec.MeterProvider})
		require.NoError(t, err)
		return r
	}
	first, second := runner(), runner()
	ctx := context.Background()
	_, err = first.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	record := f.last(t, "saga:sale-1")
	require.NoError(t, first.SendStored(ctx, record))
	require.NoError(t, second.SendStored(ctx, record))

	outcomes := map[string]int{}
	for _, s := range f.rec.Named("send make.reservation") {
		outcomes[attr(t, s, "cairn.outcome")]++
	}
	assert.Equal(t, map[string]int{"sent": 1, "duplicate": 1}, outcomes)
	appends := f.rec.Named("append order")
	require.Len(t, appends, 1, "the command's effect is appended once")
	n := 0
	for ev, err := range f.store.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		n++
		assert.Equal(t, appends[0].SpanContext().SpanID(), telemetry.SpanContextOf(ev.Metadata).SpanID())
	}
	assert.Equal(t, 1, n)
	assert.Empty(t, oteltest.Orphans(f.rec.Ended()))
}

// reviewGates is the gauges test's Gate saga, whose handler fails while
// broken is set, on store, measured by rec.
func reviewGates(t *testing.T, store eventstore.Store, rec *oteltest.Recorder, broken *atomic.Bool) func() *saga.Runner[Gate] {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Gate](reg, "gate.state", 1))
	require.NoError(t, codec.Register[Knock](reg, "knock", 1))
	typ, err := saga.New[Gate]("gate", reg, saga.Options[Gate]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(typ, saga.Event[Gate, Knock]{Starts: true,
		Instance: func(e Knock, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *Gate, _ Knock, _ *saga.Output) error {
			if broken.Load() {
				return errors.New("broken")
			}
			s.N++
			return nil
		}}))
	return func() *saga.Runner[Gate] {
		r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Logger: testLogger(t), MeterProvider: rec.MeterProvider,
			TracerProvider: rec.TracerProvider, MaxBatchDelay: time.Millisecond,
			Retry: retry.Policy{Attempts: 1, Initial: time.Microsecond, Max: time.Microsecond}})
		require.NoError(t, err)
		return r
	}
}
