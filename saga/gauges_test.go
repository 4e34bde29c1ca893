package saga_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/testrig/oteltest"
	"github.com/cairn-es/cairn/internal/testrig/pgtest"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// gauge returns the value of the int64 gauge name of saga type typ, and
// false when it has none now.
func gauge(t *testing.T, rec *oteltest.Recorder, name, typ string) (int64, bool) {
	t.Helper()
	return rec.Int64(t, name, telemetry.SagaTypeKey.String(typ))
}

func requireGauge(t *testing.T, rec *oteltest.Recorder, name, typ string, want int64) {
	t.Helper()
	got, ok := gauge(t, rec, name, typ)
	require.True(t, ok, "%s is observed", name)
	require.Equal(t, want, got, name)
}

// gaugeStores are the stores the gauges are checked on: what they read
// (records, checkpoints, the log) comes from the store.
func gaugeStores(t *testing.T) map[string]func(t *testing.T) eventstore.Store {
	return map[string]func(t *testing.T) eventstore.Store{
		"memory": func(*testing.T) eventstore.Store { return memory.New() },
		"SQLite": func(t *testing.T) eventstore.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
			require.NoError(t, err)
			return s
		},
		"PostgreSQL": func(t *testing.T) eventstore.Store {
			server := pgtest.ForTest(t, pgtest.Options{})
			s, err := postgres.Open(context.Background(), server.URL, postgres.Options{Schema: server.TempSchema(t, "gauges")})
			require.NoError(t, err)
			return s
		},
	}
}

// onGaugeStores runs test on each of gaugeStores.
func onGaugeStores(t *testing.T, test func(t *testing.T, store eventstore.Store)) {
	for name, open := range gaugeStores(t) {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

// Gate is the state of a saga whose handler fails while its switch is
// broken; Knock is its message.
type (
	Gate  struct{ N int }
	Knock struct{ ID string }
)

// TestTheParkedGaugeFollowsTheOperatorsSkipAndRetry: instances parked on a
// failing handler are counted now; a Skip, and a Retry after the fix,
// each take one off.
func TestTheParkedGaugeFollowsTheOperatorsSkipAndRetry(t *testing.T) {
	onGaugeStores(t, testTheParkedGaugeFollowsTheOperatorsSkipAndRetry)
}

func testTheParkedGaugeFollowsTheOperatorsSkipAndRetry(t *testing.T, store eventstore.Store) {
	ctx := context.Background()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Gate](reg, "gate.state", 1))
	require.NoError(t, codec.Register[Knock](reg, "knock", 1))
	typ, err := saga.New[Gate]("gate", reg, saga.Options[Gate]{})
	require.NoError(t, err)
	var broken atomic.Bool
	require.NoError(t, saga.On(typ, saga.Event[Gate, Knock]{Starts: true,
		Instance: func(e Knock, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *Gate, _ Knock, _ *saga.Output) error {
			if broken.Load() {
				return errors.New("broken")
			}
			s.N++
			return nil
		}}))
	t.Cleanup(func() { _ = store.Close() })
	rec := oteltest.New(t)
	r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Logger: testLogger(t), MeterProvider: rec.MeterProvider,
		TracerProvider: rec.TracerProvider, Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	defer r.ObserveGauges()()

	requireGauge(t, rec, "cairn.saga.parked", "gate", 0)
	broken.Store(true)
	for _, id := range []string{"a", "b"} {
		out, err := r.Deliver(ctx, saga.Delivery{Source: "knocks-" + id, Event: Knock{ID: id}})
		require.NoError(t, err)
		require.Equal(t, saga.Parked, out)
	}
	requireGauge(t, rec, "cairn.saga.parked", "gate", 2)
	parked, _ := rec.Int64(t, "cairn.saga.steps", telemetry.SagaTypeKey.String("gate"), telemetry.OutcomeKey.String("parked"))
	assert.EqualValues(t, 2, parked, "one step each, however many attempts")

	ids := map[string]string{}
	for _, p := range r.Parked() {
		ids[p.Instance] = p.Message.ID
	}
	require.NoError(t, r.Skip(ctx, "a", ids["a"]))
	requireGauge(t, rec, "cairn.saga.parked", "gate", 1)
	broken.Store(false)
	out, err := r.Retry(ctx, "b", ids["b"])
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	requireGauge(t, rec, "cairn.saga.parked", "gate", 0)
}

// TestTheHeldAndGapGaugesFollowTheGap: an early delivery is held and opens
// a gap, whose age follows the runner's clock; the gap filling closes it,
// and so does an operator's Release.
func TestTheHeldAndGapGaugesFollowTheGap(t *testing.T) {
	onGaugeStores(t, testTheHeldAndGapGaugesFollowTheGap)
}

func testTheHeldAndGapGaugesFollowTheGap(t *testing.T, store eventstore.Store) {
	f := newTracedFixtureOn(t, store)
	ctx := context.Background()
	defer f.runner.ObserveGauges()()
	note := func(seq uint64, text string) saga.Outcome {
		out, err := f.runner.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: seq, Event: Note{OrderID: "1", Text: text}})
		require.NoError(t, err)
		return out
	}
	age := func() float64 {
		v, ok := f.rec.Float64(t, "cairn.saga.gap.age", telemetry.SagaTypeKey.String("sale"))
		require.True(t, ok)
		return v
	}
	require.Equal(t, saga.Handled, note(0, "n0"))
	requireGauge(t, f.rec, "cairn.saga.held", "sale", 0)
	requireGauge(t, f.rec, "cairn.saga.gaps", "sale", 0)
	assert.Zero(t, age())

	require.Equal(t, saga.Held, note(2, "n2"))
	f.clock.Advance(90 * time.Second)
	requireGauge(t, f.rec, "cairn.saga.held", "sale", 1)
	requireGauge(t, f.rec, "cairn.saga.gaps", "sale", 1)
	assert.InDelta(t, 90, age(), 0.001)

	require.Equal(t, saga.Handled, note(1, "n1"))
	requireGauge(t, f.rec, "cairn.saga.held", "sale", 0)
	requireGauge(t, f.rec, "cairn.saga.gaps", "sale", 0)
	assert.Zero(t, age())

	require.Equal(t, saga.Held, note(5, "n5"))
	require.Equal(t, saga.Held, note(4, "n4"))
	requireGauge(t, f.rec, "cairn.saga.held", "sale", 2)
	requireGauge(t, f.rec, "cairn.saga.gaps", "sale", 1)
	require.NoError(t, f.runner.Release(ctx, "1", "notes", 3))
	requireGauge(t, f.rec, "cairn.saga.held", "sale", 0)
	requireGauge(t, f.rec, "cairn.saga.gaps", "sale", 0)
}

// TestTheDeadlineGaugesCountPendingAndOverdue: deadlines scheduled are
// pending; once the runner's clock passes them they are overdue too,
// until they fire.
func TestTheDeadlineGaugesCountPendingAndOverdue(t *testing.T) {
	onGaugeStores(t, testTheDeadlineGaugesCountPendingAndOverdue)
}

func testTheDeadlineGaugesCountPendingAndOverdue(t *testing.T, store eventstore.Store) {
	f := newTracedFixtureOn(t, store)
	ctx := context.Background()
	defer f.runner.ObserveGauges()()
	for _, id := range []string{"1", "2"} {
		_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: id}})
		require.NoError(t, err)
		f.clock.Advance(time.Minute)
	}
	requireGauge(t, f.rec, "cairn.saga.deadlines.pending", "sale", 2)
	requireGauge(t, f.rec, "cairn.saga.deadlines.overdue", "sale", 0)
	f.clock.Advance(13*time.Minute + 30*time.Second) // the first is due 15 minutes after its step, the second a minute later
	requireGauge(t, f.rec, "cairn.saga.deadlines.pending", "sale", 2)
	requireGauge(t, f.rec, "cairn.saga.deadlines.overdue", "sale", 1)
	f.clock.Advance(time.Hour)
	requireGauge(t, f.rec, "cairn.saga.deadlines.overdue", "sale", 2)
	fired, err := f.runner.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, fired)
	requireGauge(t, f.rec, "cairn.saga.deadlines.pending", "sale", 0)
	requireGauge(t, f.rec, "cairn.saga.deadlines.overdue", "sale", 0)
}

// TestTheUnsentGaugeCountsWhatAnotherRunnerRecorded: commands recorded by
// one runner (a process that stopped before its outbox sent them) are
// unsent for the runner that starts next, whose memory never held them;
// the count is kept for its refresh interval, and falls to zero once the
// outbox has sent them.
func TestTheUnsentGaugeCountsWhatAnotherRunnerRecorded(t *testing.T) {
	onGaugeStores(t, testTheUnsentGaugeCountsWhatAnotherRunnerRecorded)
}

func testTheUnsentGaugeCountsWhatAnotherRunnerRecorded(t *testing.T, store eventstore.Store) {
	f := newTracedFixtureOn(t, store)
	ctx := context.Background()
	for _, id := range []string{"1", "2", "3"} {
		_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "orders-in", Event: OrderPlaced{OrderID: id}})
		require.NoError(t, err)
	}
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "notes", Event: Note{OrderID: "1", Text: "no command"}})
	require.NoError(t, err)

	next := f.newRunner(t)
	next.SetUnsentRefresh(-1)
	stopNext := next.ObserveGauges()
	requireGauge(t, f.rec, "cairn.saga.outbox.unsent", "sale", 3)
	stopNext()

	cached := f.newRunner(t) // keeps its count for the default interval
	defer cached.ObserveGauges()()
	requireGauge(t, f.rec, "cairn.saga.outbox.unsent", "sale", 3)

	require.NoError(t, next.CatchUp(ctx))
	x, err := next.Explain(ctx, "1")
	require.NoError(t, err)
	require.Equal(t, []string{"placed", "no command", "reserved", "paid"}, x.State.Seen, "the outbox sent everything")
	requireGauge(t, f.rec, "cairn.saga.outbox.unsent", "sale", 3)
	cached.SetUnsentRefresh(-1)
	requireGauge(t, f.rec, "cairn.saga.outbox.unsent", "sale", 0)
}

// TestRunObservesTheGaugesUntilItReturns: Run registers the gauges, once
// however many Runs overlap, and the last to return unregisters them, so
// a runner that stopped leaves nothing in the meter provider.
func TestRunObservesTheGaugesUntilItReturns(t *testing.T) {
	f := newTracedFixture(t)
	_, ok := gauge(t, f.rec, "cairn.saga.parked", "sale")
	require.False(t, ok, "nothing observed before Run")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- f.runner.Run(ctx) }()
	}
	require.Eventually(t, func() bool {
		_, ok := gauge(t, f.rec, "cairn.saga.parked", "sale")
		return ok
	}, 5*time.Second, 5*time.Millisecond)
	for _, name := range []string{"cairn.saga.held", "cairn.saga.gaps", "cairn.saga.deadlines.pending", "cairn.saga.deadlines.overdue"} {
		requireGauge(t, f.rec, name, "sale", 0)
	}
	require.Eventually(t, func() bool {
		_, ok := gauge(t, f.rec, "cairn.saga.outbox.unsent", "sale")
		return ok
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	for range 2 {
		require.NoError(t, <-done)
	}
	_, ok = gauge(t, f.rec, "cairn.saga.parked", "sale")
	assert.False(t, ok, "unregistered when Run returns")
}
