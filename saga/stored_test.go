package saga_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// storedFixture runs the test saga without Run or CatchUp: the test reads
// the store itself and hands the runner each event and step record.
type storedFixture struct {
	store *memory.Store
	reg   *codec.Registry
	sale  *saga.Type[Sale]
	bus   *command.Bus
	clock *sagatest.Clock
	repo  *aggregate.Repository[Order, *Order]
}

func newStoredFixture(t *testing.T) *storedFixture {
	f := &storedFixture{store: memory.New(), clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { _ = f.store.Close() })
	f.reg = testRegistry(t)
	f.sale = saleType(t, f.reg)
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	f.bus = command.New(f.store, f.reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](f.bus, orders))
	require.NoError(t, command.Route[MakePayment](f.bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](f.bus, orders))
	f.repo, err = aggregate.NewRepository(f.store, f.reg, orders, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return f
}

// runner returns a new runner on the fixture's store: another process.
func (f *storedFixture) runner(t *testing.T) *saga.Runner[Sale] {
	r, err := saga.NewRunner(f.sale, f.store, f.bus, saga.RunnerOptions{Clock: f.clock, Logger: testLogger(t), Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	return r
}

func (f *storedFixture) place(t *testing.T, id string) {
	t.Helper()
	data, err := f.reg.Encode(OrderPlaced{OrderID: id})
	require.NoError(t, err)
	_, err = f.store.Append(context.Background(), "order-"+id, eventstore.NoStream, data)
	require.NoError(t, err)
}

// drive hands r every stored event and every step record, in the log's
// order, until a pass finds nothing new; it returns the outcomes of the
// events.
func (f *storedFixture) drive(t *testing.T, r *saga.Runner[Sale]) map[saga.Outcome]int {
	t.Helper()
	ctx := context.Background()
	outcomes := map[saga.Outcome]int{}
	var events, records eventstore.Position
	for more := true; more; {
		more = false
		for ev, err := range f.store.ReadAll(ctx, events, eventstore.Filter{}) {
			require.NoError(t, err)
			events, more = ev.Position, true
			if strings.HasPrefix(ev.StreamID, saga.StreamPrefix) {
				continue
			}
			out, err := r.HandleStored(ctx, ev)
			require.NoError(t, err, "event %s #%d of %s", ev.Type, ev.Version, ev.StreamID)
			outcomes[out]++
		}
		for ev, err := range f.store.ReadAll(ctx, records, eventstore.Filter{StreamPrefixes: []string{f.sale.Category()}}) {
			require.NoError(t, err)
			records, more = ev.Position, true
			require.NoError(t, r.SendStored(ctx, ev))
		}
	}
	return outcomes
}

func TestHandleStoredAndSendStoredRunTheFlowAsTheRunnersConsumersDo(t *testing.T) {
	f := newStoredFixture(t)
	r := f.runner(t)
	for _, id := range []string{"1", "2"} {
		f.place(t, id)
	}
	out := f.drive(t, r)
	for _, id := range []string{"1", "2"} {
		inst, err := f.repo.Load(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, &Order{Reserved: 1, Paid: 1, Confirmed: 1}, inst.State, "order %s", id)
	}
	assert.Equal(t, 6, out[saga.Handled], "placed, reserved and paid of each order")
	assert.Equal(t, 2, out[saga.Ignored], "each order's confirmation note reaches a completed instance")

	// Everything again (a bridge that lost its place): every event is a
	// duplicate or ignored, and no instance takes another step.
	before := len(f.history(t, r, "1"))
	again := f.drive(t, f.runner(t))
	assert.Zero(t, again[saga.Handled])
	assert.Equal(t, 6, again[saga.Duplicate])
	assert.Len(t, f.history(t, r, "1"), before)
}

func TestHandleStoredTakesAStreamsEventsInOrderAndDropsOlderOnes(t *testing.T) {
	f := newStoredFixture(t)
	r := f.runner(t)
	ctx := context.Background()
	for _, e := range []any{OrderPlaced{OrderID: "1"}, Note{OrderID: "1", Text: "a"}, Note{OrderID: "1", Text: "b"}} {
		data, err := f.reg.Encode(e)
		require.NoError(t, err)
		_, err = f.store.Append(ctx, "order-1", eventstore.Any, data)
		require.NoError(t, err)
	}
	var stored []eventstore.Event
	for ev, err := range f.store.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		stored = append(stored, ev)
	}
	for i, want := range []saga.Outcome{saga.Handled, saga.Handled, saga.Duplicate, saga.Handled, saga.Duplicate} {
		ev := stored[[]int{0, 1, 0, 2, 1}[i]]
		out, err := r.HandleStored(ctx, ev)
		require.NoError(t, err)
		assert.Equal(t, want, out, "delivery %d: #%d", i, ev.Version)
	}
	x, err := r.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "a", "b"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"order-1": 2}, x.Watermarks)
}

func TestHandleStoredRefusesWhatCannotReachAnInstance(t *testing.T) {
	f := newStoredFixture(t)
	r := f.runner(t)
	ctx := context.Background()
	data, err := f.reg.Encode(Note{OrderID: ""})
	require.NoError(t, err)
	_, err = f.store.Append(ctx, "notes-x", eventstore.NoStream, data)
	require.NoError(t, err)
	var ev eventstore.Event
	for e, err := range f.store.ReadStream(ctx, "notes-x", eventstore.Forward(0)) {
		require.NoError(t, err)
		ev = e
	}
	_, err = r.HandleStored(ctx, ev)
	var herr *saga.HandlerError
	require.ErrorAs(t, err, &herr, "a mapping that finds no instance")
	assert.Contains(t, herr.Message, `"notes-x"`)
	assert.Contains(t, err.Error(), "empty instance ID")

	ev.Type, ev.Data = "unmapped.type", []byte(`{}`)
	out, err := r.HandleStored(ctx, ev)
	require.NoError(t, err)
	assert.Equal(t, saga.Ignored, out, "an event of a type the saga does not map")

	ev.StreamID = ""
	_, err = r.HandleStored(ctx, ev)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)

	n := 0
	for _, err := range f.store.ReadAll(ctx, eventstore.Start, eventstore.Filter{StreamPrefixes: []string{saga.StreamPrefix}}) {
		require.NoError(t, err)
		n++
	}
	assert.Zero(t, n, "nothing was stored")
}

func TestSendStoredTakesOnlyTheSagasStepRecords(t *testing.T) {
	f := newStoredFixture(t)
	r := f.runner(t)
	ctx := context.Background()
	f.place(t, "1")
	var placed eventstore.Event
	for ev, err := range f.store.ReadStream(ctx, "order-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		placed = ev
	}
	err := r.SendStored(ctx, placed)
	var bad *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, "order-1", bad.Stream)
	assert.Contains(t, err.Error(), `not a step record of saga "sale"`)
}

func TestLoadDeadlinesLetsAFreshRunnerFireWhatAnotherScheduled(t *testing.T) {
	f := newStoredFixture(t)
	ctx := context.Background()
	f.place(t, "soldout1") // its reservation is refused: it waits for its deadline
	f.drive(t, f.runner(t))

	// Another process, driven by hand, fires the deadline the first one
	// scheduled, once.
	r := f.runner(t)
	require.NoError(t, r.LoadDeadlines(ctx))
	f.clock.Advance(15 * time.Minute)
	fired, err := r.FireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fired)
	fired, err = r.FireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, fired, "it fired once")
	x, err := r.Explain(ctx, "soldout1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "due1"}, x.State.Seen)
	assert.Empty(t, x.Deadlines)
}

func (f *storedFixture) history(t *testing.T, r *saga.Runner[Sale], id string) []saga.Step {
	t.Helper()
	var out []saga.Step
	for s, err := range r.History(context.Background(), id) {
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}
