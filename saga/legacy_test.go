package saga_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/cairn-es/cairn/internal/trusted"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The tests of this file read stores written by the version 1 code
// (testdata/v1, see its README): a saga's instances in flight when a user
// upgrades, each with its source streams. The saga is declared here as it
// was there, under the same names.

type legacyTrip struct {
	Trip string   `json:"trip"`
	Seen []string `json:"seen"`
}

type (
	legacyStarted struct{ Trip string }
	legacyNoted   struct {
		Trip     string
		N        int
		Poison   bool
		Checkout bool
	}
	legacyFinished struct{ Trip string }
	legacyBook     struct{ Trip string }
	legacyPay      struct{ Trip string }
	legacyExpiry   struct{ Note string }
	legacyBooked   struct{ Trip string }
	legacyPaid     struct{ Trip string }
)

func (c legacyBook) AggregateID() string { return c.Trip }
func (c legacyPay) AggregateID() string  { return c.Trip }

// legacyBooking is the aggregate the saga's commands go to: it takes them
// all, and counts them.
type legacyBooking struct{ Booked, Paid int }

func (b *legacyBooking) book(_ context.Context, c legacyBook) ([]any, error) {
	return []any{legacyBooked(c)}, nil
}

func (b *legacyBooking) pay(_ context.Context, c legacyPay) ([]any, error) {
	return []any{legacyPaid(c)}, nil
}

func (b *legacyBooking) booked(legacyBooked) { b.Booked++ }
func (b *legacyBooking) paid(legacyPaid)     { b.Paid++ }

// legacyFixture is a store loaded from a version 1 dump, and the saga of
// the new code on it.
type legacyFixture struct {
	t     *testing.T
	ctx   context.Context
	store *memory.Store
	reg   *codec.Registry
	clock *sagatest.Clock
	bus   *command.Bus
	repo  *aggregate.Repository[legacyBooking, *legacyBooking]
	trip  *saga.Type[legacyTrip]
	r     *saga.Runner[legacyTrip]
	// dumped are the events of the dump, in their order.
	dumped []eventstore.Event
	// poison makes a Poison note fail, as it did when the dump was made.
	poison atomic.Bool
}

// legacyStart is the new runner's clock at the upgrade: after the dumps'
// last steps (09:00 to 09:07), before their deadlines (10:00).
var legacyStart = time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC)

func loadLegacy(t *testing.T, name string) *legacyFixture {
	f := &legacyFixture{t: t, ctx: context.Background(), store: memory.New(), clock: sagatest.NewClock(legacyStart)}
	t.Cleanup(func() { _ = f.store.Close() })
	f.poison.Store(true)
	f.reg = codec.NewRegistry(codec.Options{})
	for _, err := range []error{
		codec.Register[legacyTrip](f.reg, "legacy.state", 1),
		codec.Register[legacyStarted](f.reg, "legacy.started", 1),
		codec.Register[legacyNoted](f.reg, "legacy.noted", 1),
		codec.Register[legacyFinished](f.reg, "legacy.finished", 1),
		codec.Register[legacyBook](f.reg, "legacy.book", 1),
		codec.Register[legacyPay](f.reg, "legacy.pay", 1),
		codec.Register[legacyExpiry](f.reg, "legacy.expiry", 1),
		codec.Register[legacyBooked](f.reg, "legacy.booked", 1),
		codec.Register[legacyPaid](f.reg, "legacy.paid", 1),
	} {
		require.NoError(t, err)
	}
	f.trip = f.legacyType()
	bookings, err := aggregate.NewType[legacyBooking]("booking", aggregate.Options[legacyBooking]{},
		aggregate.Handles((*legacyBooking).book), aggregate.Handles((*legacyBooking).pay),
		aggregate.Applies((*legacyBooking).booked), aggregate.Applies((*legacyBooking).paid))
	require.NoError(t, err)
	f.bus = command.New(f.store, f.reg, command.Options{})
	require.NoError(t, command.Route[legacyBook](f.bus, bookings))
	require.NoError(t, command.Route[legacyPay](f.bus, bookings))
	f.repo, err = aggregate.NewRepository(f.store, f.reg, bookings, aggregate.RepositoryOptions{})
	require.NoError(t, err)

	file, err := os.Open(filepath.Join("testdata", "v1", name+".jsonl"))
	require.NoError(t, err)
	defer file.Close()
	lines := bufio.NewScanner(file)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var ev eventstore.Event
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
		f.dumped = append(f.dumped, ev)
	}
	require.NoError(t, lines.Err())
	require.NotEmpty(t, f.dumped)
	slices.SortStableFunc(f.dumped, func(a, b eventstore.Event) int {
		switch {
		case a.Position.Before(b.Position):
			return -1
		case b.Position.Before(a.Position):
			return 1
		}
		return 0
	})
	// Appended as stored, one at a time in the dump's global order: the
	// memory store numbers positions densely, so each event gets back the
	// position it had.
	for _, ev := range f.dumped {
		expected := eventstore.NoStream
		if ev.Version > 0 {
			expected = eventstore.Exact(ev.Version - 1)
		}
		res, err := f.store.Append(trusted.Writer(f.ctx), ev.StreamID, expected, ev.EventData)
		require.NoError(t, err, "%s #%d", ev.StreamID, ev.Version)
		require.False(t, res.Duplicate)
		require.Equal(t, ev.Version, res.FirstVersion, "%s", ev.StreamID)
		require.Equal(t, ev.Position, res.Position, "%s #%d", ev.StreamID, ev.Version)
	}
	for ev, err := range f.store.ReadAll(f.ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		i := slices.IndexFunc(f.dumped, func(d eventstore.Event) bool { return d.Position == ev.Position })
		require.GreaterOrEqual(t, i, 0)
		want := f.dumped[i]
		assert.Equal(t, want.EventData, ev.EventData)
		assert.Equal(t, want.StreamID, ev.StreamID)
		assert.Equal(t, want.Version, ev.Version)
	}
	f.r = f.runner()
	return f
}

// runner returns a runner of the new code on the fixture's store (another
// process, when called again).
func (f *legacyFixture) runner() *saga.Runner[legacyTrip] {
	f.t.Helper()
	r, err := saga.NewRunner(f.trip, f.store, f.bus, saga.RunnerOptions{Clock: f.clock, Retry: retry.Policy{Attempts: 1},
		Checkpoints: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(f.t, err)
	return r
}

// legacyType declares the saga as the version 1 code did.
func (f *legacyFixture) legacyType() *saga.Type[legacyTrip] {
	t := f.t
	tt, err := saga.New[legacyTrip]("legacy", f.reg, saga.Options[legacyTrip]{})
	require.NoError(t, err)
	require.NoError(t, saga.Sends[legacyTrip, legacyBook](tt))
	require.NoError(t, saga.Sends[legacyTrip, legacyPay](tt))
	require.NoError(t, saga.On(tt, saga.Event[legacyTrip, legacyStarted]{Starts: true,
		Instance: func(e legacyStarted, _ eventstore.Metadata) string { return e.Trip },
		Handle: func(_ context.Context, s *legacyTrip, e legacyStarted, out *saga.Output) error {
			s.Trip = e.Trip
			s.Seen = append(s.Seen, "started")
			out.ScheduleAfter("expire", time.Hour, legacyExpiry{Note: "1h"})
			return nil
		}}))
	require.NoError(t, saga.On(tt, saga.Event[legacyTrip, legacyNoted]{
		Instance: func(e legacyNoted, _ eventstore.Metadata) string { return e.Trip },
		Handle: func(_ context.Context, s *legacyTrip, e legacyNoted, out *saga.Output) error {
			if e.Poison && f.poison.Load() {
				return errors.New("poisoned note")
			}
			s.Seen = append(s.Seen, fmt.Sprintf("noted %d", e.N))
			if e.Checkout {
				out.Send(legacyBook{Trip: s.Trip})
				out.Send(legacyPay{Trip: s.Trip})
			}
			return nil
		}}))
	require.NoError(t, saga.On(tt, saga.Event[legacyTrip, legacyFinished]{
		Instance: func(e legacyFinished, _ eventstore.Metadata) string { return e.Trip },
		Handle: func(_ context.Context, s *legacyTrip, _ legacyFinished, out *saga.Output) error {
			s.Seen = append(s.Seen, "finished")
			out.Complete()
			return nil
		}}))
	require.NoError(t, saga.OnDeadline(tt, "expire", func(_ context.Context, s *legacyTrip, p legacyExpiry, _ *saga.Output) error {
		s.Seen = append(s.Seen, "expired "+p.Note)
		return nil
	}))
	require.NoError(t, saga.OnRejected(tt, func(_ context.Context, s *legacyTrip, _ legacyBook, reason error, _ *saga.Output) error {
		s.Seen = append(s.Seen, "book rejected: "+reason.Error())
		return nil
	}))
	require.NoError(t, saga.OnRejected(tt, func(_ context.Context, s *legacyTrip, _ legacyPay, reason error, _ *saga.Output) error {
		s.Seen = append(s.Seen, "pay rejected: "+reason.Error())
		return nil
	}))
	return tt
}

// event returns the dumped event at version of stream.
func (f *legacyFixture) event(stream string, version uint64) eventstore.Event {
	f.t.Helper()
	i := slices.IndexFunc(f.dumped, func(e eventstore.Event) bool { return e.StreamID == stream && e.Version == version })
	require.GreaterOrEqual(f.t, i, 0, "%s #%d is not in the dump", stream, version)
	return f.dumped[i]
}

// again hands the runner an event of the store once more.
func (f *legacyFixture) again(stream string, version uint64) saga.Outcome {
	f.t.Helper()
	for ev, err := range f.store.ReadStream(f.ctx, stream, eventstore.Forward(version)) {
		require.NoError(f.t, err)
		require.Equal(f.t, version, ev.Version, "%s #%d is not in the store", stream, version)
		out, err := f.r.HandleStored(f.ctx, ev)
		require.NoError(f.t, err)
		return out
	}
	f.t.Fatalf("%s #%d is not in the store", stream, version)
	return 0
}

// stored appends v to stream, after the upgrade, and hands it to the
// runner.
func (f *legacyFixture) stored(stream string, v any) saga.Outcome {
	f.t.Helper()
	data, err := f.reg.Encode(v)
	require.NoError(f.t, err)
	res, err := f.store.Append(trusted.Writer(f.ctx), stream, eventstore.Any, data)
	require.NoError(f.t, err)
	for ev, err := range f.store.ReadStream(f.ctx, stream, eventstore.Forward(res.LastVersion)) {
		require.NoError(f.t, err)
		out, err := f.r.HandleStored(f.ctx, ev)
		require.NoError(f.t, err)
		return out
	}
	f.t.Fatalf("%s #%d is not in the store", stream, res.LastVersion)
	return 0
}

func (f *legacyFixture) deliver(seq uint64, v any) saga.Outcome {
	f.t.Helper()
	out, err := f.r.Deliver(f.ctx, saga.Delivery{Source: "broker", Sequence: seq, Event: v})
	require.NoError(f.t, err)
	return out
}

func (f *legacyFixture) reject(id, commandID, reason string) saga.Outcome {
	f.t.Helper()
	out, err := f.r.Reject(f.ctx, id, commandID, errors.New(reason))
	require.NoError(f.t, err)
	return out
}

func (f *legacyFixture) explain(id string) saga.Explanation[legacyTrip] {
	f.t.Helper()
	x, err := f.r.Explain(f.ctx, id)
	require.NoError(f.t, err)
	require.True(f.t, x.Exists)
	return x
}

func (f *legacyFixture) seen(id string) []string {
	f.t.Helper()
	return f.explain(id).State.Seen
}

// commands returns the IDs of the commands the instance's steps sent, in
// order, and checks that the new code reads its whole history.
func (f *legacyFixture) commands(id string) []string {
	f.t.Helper()
	var ids []string
	for s, err := range f.r.History(f.ctx, id) {
		require.NoError(f.t, err)
		for _, c := range s.Commands {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// history checks that every version 1 step of instance id reads as a step.
func (f *legacyFixture) history(id string, kinds ...string) {
	f.t.Helper()
	var got []string
	for s, err := range f.r.History(f.ctx, id) {
		require.NoError(f.t, err)
		got = append(got, s.Kind)
	}
	assert.Equal(f.t, kinds, got, "the kinds of the steps of %s", id)
}

// at is a time of the clock of the dumps.
func at(hour, minute int) time.Time { return time.Date(2026, 1, 1, hour, minute, 0, 0, time.UTC) }

// expire is the deadline every dumped instance set when it started: its
// ID as version 1 made it, from the starting event's key and the name.
func expire(trip string) saga.Deadline {
	return saga.Deadline{ID: "e/trip-" + trip + "/0/expire", Name: "expire", At: at(10, 0)}
}

// (a) A plain instance mid-flow: a stored source and a delivery source
// with watermarks, and a pending deadline.
func TestLegacyV1InstanceGoesOnWithItsWatermarksAndDeadline(t *testing.T) {
	f := loadLegacy(t, "a_deadline_and_watermarks")
	f.history("a", "event", "event", "event")
	x := f.explain("a")
	assert.Equal(t, uint64(2), x.Version)
	assert.True(t, x.Started)
	assert.False(t, x.Completed)
	assert.Equal(t, &legacyTrip{Trip: "a", Seen: []string{"started", "noted 1", "noted 100"}}, x.State)
	assert.Equal(t, map[string]uint64{"trip-a": 1, "broker": 0}, x.Watermarks)
	assert.Empty(t, x.OutOfOrder)
	assert.Empty(t, x.Pending)
	assert.Empty(t, x.Held)
	assert.Nil(t, x.Parked)
	assert.Equal(t, []saga.Deadline{expire("a")}, x.Deadlines)

	// What the instance took before the upgrade is a duplicate.
	assert.Equal(t, saga.Duplicate, f.again("trip-a", 0))
	assert.Equal(t, saga.Duplicate, f.again("trip-a", 1))
	assert.Equal(t, saga.Duplicate, f.deliver(0, legacyNoted{Trip: "a", N: 100}))
	// What comes next is handled.
	assert.Equal(t, saga.Handled, f.stored("trip-a", legacyNoted{Trip: "a", N: 2}))
	assert.Equal(t, saga.Handled, f.deliver(1, legacyNoted{Trip: "a", N: 101}))

	// The deadline, set by version 1, fires once when due.
	require.NoError(t, f.r.LoadDeadlines(f.ctx))
	fired, err := f.r.FireDue(f.ctx)
	require.NoError(t, err)
	assert.Zero(t, fired, "not due before 10:00")
	f.clock.Advance(30 * time.Minute)
	fired, err = f.r.FireDue(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fired)
	f.clock.Advance(time.Hour)
	fired, err = f.r.FireDue(f.ctx)
	require.NoError(t, err)
	assert.Zero(t, fired, "it fired already")
	other := f.runner() // another process, which reads the deadlines from the store
	require.NoError(t, other.LoadDeadlines(f.ctx))
	fired, err = other.FireDue(f.ctx)
	require.NoError(t, err)
	assert.Zero(t, fired, "it fired already")

	x = f.explain("a")
	assert.Equal(t, []string{"started", "noted 1", "noted 100", "noted 2", "noted 101", "expired 1h"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"trip-a": 2, "broker": 1}, x.Watermarks)
	assert.Empty(t, x.Deadlines)
	assert.Equal(t, uint64(5), x.Version)
}

// (b) Deliveries held early, behind a gap in their source.
func TestLegacyV1HeldDeliveriesGoWhenTheGapFills(t *testing.T) {
	f := loadLegacy(t, "b_delivery_held_early")
	f.history("b", "event", "event", "held", "held")
	x := f.explain("b")
	assert.Equal(t, []string{"started", "noted 100"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"trip-b": 0, "broker": 0}, x.Watermarks)
	assert.Empty(t, x.Pending)
	assert.Nil(t, x.Parked)
	require.Len(t, x.Held, 2)
	for i, seq := range []uint64{2, 3} {
		h := x.Held[i]
		assert.Equal(t, fmt.Sprintf("e/broker/%d", seq), h.ID)
		assert.Equal(t, "event", h.Kind)
		assert.Equal(t, "broker", h.Source)
		assert.Equal(t, seq, h.Sequence)
		assert.Equal(t, "legacy.noted", h.Type)
		assert.NotZero(t, h.EventID)
		assert.Equal(t, uint64(1), h.WaitsFor, "held %d", seq)
		assert.Equal(t, at(9, int(seq)), h.Since)
	}
	assert.Equal(t, []saga.Deadline{expire("b")}, x.Deadlines)
	require.NoError(t, f.r.LoadDeadlines(f.ctx)) // (which also reads the gaps)
	gaps := f.r.Gaps()
	require.Len(t, gaps, 1)
	assert.Equal(t, saga.Gap{Instance: "b", Source: "broker", WaitsFor: 1, Held: 2, Since: at(9, 2)}, gaps[0])

	assert.Equal(t, saga.Duplicate, f.deliver(2, legacyNoted{Trip: "b", N: 102}), "held already")
	assert.Equal(t, saga.Duplicate, f.deliver(0, legacyNoted{Trip: "b", N: 100}), "handled already")
	assert.Equal(t, saga.Handled, f.deliver(1, legacyNoted{Trip: "b", N: 101}), "the gap fills")

	x = f.explain("b")
	assert.Equal(t, []string{"started", "noted 100", "noted 101", "noted 102", "noted 103"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"trip-b": 0, "broker": 3}, x.Watermarks)
	assert.Empty(t, x.Held)
	assert.Empty(t, f.r.Gaps())
	for seq := range uint64(4) {
		assert.Equal(t, saga.Duplicate, f.deliver(seq, legacyNoted{Trip: "b", N: 100 + int(seq)}), "delivery %d again", seq)
	}
	assert.Equal(t, saga.Handled, f.deliver(4, legacyNoted{Trip: "b", N: 104}))
	assert.Equal(t, []string{"started", "noted 100", "noted 101", "noted 102", "noted 103", "noted 104"}, f.seen("b"))
}

// (c) An instance parked on a stored event, with later stored events of
// the same stream and of another one held behind it (and, in the other
// stream, an event of another instance between them).
func TestLegacyV1ParkedStoredEventThenItsHeldOnesInStreamOrder(t *testing.T) {
	upgraded := func(t *testing.T, f *legacyFixture) {
		t.Helper()
		f.history("c", "event", "event", "parked", "held", "held", "held", "held")
		x := f.explain("c")
		assert.Equal(t, uint64(6), x.Version)
		assert.Equal(t, []string{"started", "noted 1"}, x.State.Seen)
		assert.Equal(t, map[string]uint64{"trip-c": 1}, x.Watermarks)
		assert.Equal(t, map[string]uint64{"trip-c": 2, "extra-c": 0}, x.Pending, "the held stored events are read again from there")
		assert.Empty(t, x.Held, "stored events are not kept in the record")
		require.NotNil(t, x.Parked)
		assert.Equal(t, saga.ParkedMessage{ID: "e/trip-c/2", Kind: "event", Source: "trip-c", Sequence: 2, Type: "legacy.noted",
			Error: "poisoned note", Attempts: 2, Since: at(9, 2)}, *x.Parked)
		assert.Equal(t, []saga.Deadline{expire("c")}, x.Deadlines)

		// While parked: the parked event again is a duplicate, and so is a
		// held one (it waits already); a later one waits behind them.
		assert.Equal(t, saga.Duplicate, f.again("trip-c", 2))
		assert.Equal(t, saga.Duplicate, f.again("trip-c", 1))
		assert.Equal(t, saga.Duplicate, f.again("trip-c", 3), "held already")
		assert.Equal(t, saga.Held, f.stored("trip-c", legacyNoted{Trip: "c", N: 5}))
		assert.Equal(t, []string{"started", "noted 1"}, f.seen("c"))
	}
	goneOn := func(t *testing.T, f *legacyFixture, seen []string) {
		t.Helper()
		x := f.explain("c")
		assert.Equal(t, seen, x.State.Seen, "the held events, once each, in their streams' order")
		assert.Nil(t, x.Parked)
		assert.Empty(t, x.Pending)
		assert.Empty(t, x.Held)
		assert.Equal(t, map[string]uint64{"trip-c": 5, "extra-c": 2}, x.Watermarks)
		for v := range uint64(6) {
			assert.Equal(t, saga.Duplicate, f.again("trip-c", v), "trip-c #%d again", v)
		}
		assert.Equal(t, saga.Duplicate, f.again("extra-c", 0))
		assert.Equal(t, saga.Ignored, f.again("extra-c", 1), "another instance's, which has none")
		assert.Equal(t, saga.Duplicate, f.again("extra-c", 2))
		assert.Equal(t, seen, f.seen("c"))
		assert.Equal(t, saga.Handled, f.stored("extra-c", legacyNoted{Trip: "c", N: 12}))
		assert.Equal(t, append(slices.Clone(seen), "noted 12"), f.seen("c"))
	}

	t.Run("retry", func(t *testing.T) {
		f := loadLegacy(t, "c_parked_stored_event")
		upgraded(t, f)
		// A retry that fails again keeps it parked, its attempts counted.
		out, err := f.r.Retry(f.ctx, "c", "e/trip-c/2")
		require.NoError(t, err)
		assert.Equal(t, saga.Parked, out)
		x := f.explain("c")
		require.NotNil(t, x.Parked)
		assert.Equal(t, 3, x.Parked.Attempts)
		assert.Equal(t, at(9, 2), x.Parked.Since)
		assert.Equal(t, map[string]uint64{"trip-c": 2, "extra-c": 0}, x.Pending)

		f.poison.Store(false)
		out, err = f.r.Retry(f.ctx, "c", "e/trip-c/2")
		require.NoError(t, err)
		assert.Equal(t, saga.Handled, out)
		goneOn(t, f, []string{"started", "noted 1", "noted 2", "noted 3", "noted 10", "noted 4", "noted 11", "noted 5"})
		_, err = f.r.Retry(f.ctx, "c", "e/trip-c/2")
		assert.ErrorIs(t, err, saga.ErrNotParked)
	})
	t.Run("skip", func(t *testing.T) {
		f := loadLegacy(t, "c_parked_stored_event")
		upgraded(t, f)
		require.NoError(t, f.r.Skip(f.ctx, "c", "e/trip-c/2"))
		goneOn(t, f, []string{"started", "noted 1", "noted 3", "noted 10", "noted 4", "noted 11", "noted 5"})
		assert.ErrorIs(t, f.r.Skip(f.ctx, "c", "e/trip-c/2"), saga.ErrNotParked)
	})
}

// (d) An instance parked on a delivery, with deliveries, a rejection and
// a stored event held behind it.
func TestLegacyV1ParkedDeliveryThenItsHeldOnes(t *testing.T) {
	var book, pay string
	upgraded := func(t *testing.T, f *legacyFixture) {
		t.Helper()
		f.history("d", "event", "event", "event", "parked", "held", "held", "held", "held")
		ids := f.commands("d")
		require.Len(t, ids, 2)
		book, pay = ids[0], ids[1]
		x := f.explain("d")
		assert.Equal(t, uint64(7), x.Version)
		assert.Equal(t, []string{"started", "noted 1", "noted 100"}, x.State.Seen)
		assert.Equal(t, map[string]uint64{"trip-d": 1, "broker": 0}, x.Watermarks)
		assert.Equal(t, map[string]uint64{"trip-d": 2}, x.Pending)
		require.NotNil(t, x.Parked)
		assert.Equal(t, saga.ParkedMessage{ID: "e/broker/1", Kind: "event", Source: "broker", Sequence: 1, Type: "legacy.noted",
			Error: "poisoned note", Attempts: 2, Since: at(9, 3)}, *x.Parked)
		require.Len(t, x.Held, 3)
		assert.Equal(t, []string{"e/broker/2", "r/" + book, "e/broker/3"}, []string{x.Held[0].ID, x.Held[1].ID, x.Held[2].ID})
		assert.Equal(t, saga.HeldMessage{ID: "r/" + book, Kind: "rejected", Type: "legacy.book", Command: book, Since: at(9, 5)}, x.Held[1])
		for _, h := range []saga.HeldMessage{x.Held[0], x.Held[2]} {
			assert.Equal(t, "event", h.Kind)
			assert.Equal(t, "broker", h.Source)
			assert.Equal(t, "legacy.noted", h.Type)
			assert.Equal(t, h.Sequence, h.WaitsFor, "%s waits behind the parked one, not for a gap", h.ID)
		}
		assert.Empty(t, f.r.Gaps(), "what waits behind a parked message is no gap")
		assert.Equal(t, []saga.Deadline{expire("d")}, x.Deadlines)

		// While parked: what it holds, and the parked one, are duplicates.
		assert.Equal(t, saga.Duplicate, f.deliver(1, legacyNoted{Trip: "d", N: 101, Poison: true}))
		assert.Equal(t, saga.Duplicate, f.deliver(2, legacyNoted{Trip: "d", N: 102}))
		assert.Equal(t, saga.Duplicate, f.reject("d", book, "sold out"))
		assert.Equal(t, []string{"started", "noted 1", "noted 100"}, f.seen("d"))
	}
	goneOn := func(t *testing.T, f *legacyFixture, seen []string) {
		t.Helper()
		x := f.explain("d")
		assert.Equal(t, seen, x.State.Seen)
		assert.Nil(t, x.Parked)
		assert.Empty(t, x.Held)
		assert.Empty(t, x.Pending)
		assert.Equal(t, map[string]uint64{"trip-d": 2, "broker": 3}, x.Watermarks)
		for seq := range uint64(4) {
			assert.Equal(t, saga.Duplicate, f.deliver(seq, legacyNoted{Trip: "d", N: 100 + int(seq)}), "delivery %d again", seq)
		}
		assert.Equal(t, saga.Duplicate, f.again("trip-d", 2))
		assert.Equal(t, saga.Duplicate, f.reject("d", book, "sold out"), "its rejection was taken")
		assert.Equal(t, saga.Handled, f.reject("d", pay, "card declined"))
		assert.Equal(t, saga.Duplicate, f.reject("d", pay, "card declined"))
		assert.Equal(t, append(slices.Clone(seen), "pay rejected: card declined"), f.seen("d"))
	}

	t.Run("retry", func(t *testing.T) {
		f := loadLegacy(t, "d_parked_delivery")
		upgraded(t, f)
		f.poison.Store(false)
		out, err := f.r.Retry(f.ctx, "d", "e/broker/1")
		require.NoError(t, err)
		assert.Equal(t, saga.Handled, out)
		goneOn(t, f, []string{"started", "noted 1", "noted 100", "noted 101", "noted 102", "book rejected: sold out", "noted 103", "noted 2"})
	})
	t.Run("skip", func(t *testing.T) {
		f := loadLegacy(t, "d_parked_delivery")
		upgraded(t, f)
		require.NoError(t, f.r.Skip(f.ctx, "d", "e/broker/1"))
		goneOn(t, f, []string{"started", "noted 1", "noted 100", "noted 102", "book rejected: sold out", "noted 103", "noted 2"})
	})
}

// (e) An instance that took the rejection of the second of the two
// commands of one step: version 1 kept it as the "$rejected" watermark,
// which covered the first command too.
func TestLegacyV1RejectionTakenOnceAndTheOtherCommandStillTaken(t *testing.T) {
	f := loadLegacy(t, "e_one_of_two_rejected")
	book, pay := f.legacyRejected()
	assert.Equal(t, saga.Duplicate, f.reject("e", pay, "card declined"), "taken by version 1")
	assert.Equal(t, saga.Handled, f.reject("e", book, "sold out"), "below the old watermark, but never rejected")
	assert.Equal(t, saga.Duplicate, f.reject("e", book, "sold out"))
	assert.Equal(t, saga.Duplicate, f.reject("e", pay, "card declined"))
	assert.Equal(t, []string{"started", "noted 1", "noted 2", "pay rejected: card declined", "noted 3", "book rejected: sold out"}, f.seen("e"))
}

// (e) again, with the outbox behind: it had not passed the step that sent
// the two commands when the code was upgraded, so it sends that step
// again. The command whose rejection version 1 took is not sent: its
// outcome is final.
func TestLegacyV1OutboxDoesNotSendTheCommandVersion1TookTheRejectionOf(t *testing.T) {
	f := loadLegacy(t, "e_one_of_two_rejected")
	book, _ := f.legacyRejected()
	x := f.explain("e")
	unsent := make([]string, 0, len(x.Unsent))
	for _, c := range x.Unsent {
		unsent = append(unsent, c.ID)
	}
	assert.Equal(t, []string{book}, unsent, "the rejected command's outcome was taken")
	require.NoError(t, f.r.SendStored(f.ctx, f.event(f.trip.Stream("e"), 2)))
	inst, err := f.repo.Load(f.ctx, "e")
	require.NoError(t, err)
	assert.Equal(t, 1, inst.State.Booked, "the command without an outcome is sent")
	assert.Zero(t, inst.State.Paid, "a rejected command is never carried out after its rejection was taken")
	assert.Equal(t, []string{"started", "noted 1", "noted 2", "pay rejected: card declined", "noted 3"}, f.seen("e"))
}

// legacyRejected checks instance e as upgraded, and returns the IDs of its
// two commands.
func (f *legacyFixture) legacyRejected() (book, pay string) {
	t := f.t
	t.Helper()
	f.history("e", "event", "event", "event", "rejected", "event")
	ids := f.commands("e")
	require.Len(t, ids, 2)
	x := f.explain("e")
	assert.Equal(t, []string{"started", "noted 1", "noted 2", "pay rejected: card declined", "noted 3"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"trip-e": 3}, x.Watermarks, `no "$rejected" source`)
	assert.Empty(t, x.Pending)
	assert.Empty(t, x.Held)
	assert.Nil(t, x.Parked)
	assert.Equal(t, []saga.Deadline{expire("e")}, x.Deadlines)
	return ids[0], ids[1]
}

// (f) A completed instance.
func TestLegacyV1CompletedInstanceTakesNothingMore(t *testing.T) {
	f := loadLegacy(t, "f_completed")
	f.history("f", "event", "event", "event", "event")
	seen := []string{"started", "noted 1", "noted 100", "finished"}
	x := f.explain("f")
	assert.True(t, x.Completed)
	assert.Equal(t, uint64(3), x.Version)
	assert.Equal(t, seen, x.State.Seen)
	assert.Equal(t, map[string]uint64{"trip-f": 2, "broker": 0}, x.Watermarks)
	assert.Empty(t, x.Deadlines)
	assert.True(t, x.LastStep.Completed)

	assert.Equal(t, saga.Ignored, f.stored("trip-f", legacyNoted{Trip: "f", N: 3}))
	assert.Equal(t, saga.Ignored, f.stored("extra-f", legacyNoted{Trip: "f", N: 10}))
	assert.Equal(t, saga.Ignored, f.deliver(1, legacyNoted{Trip: "f", N: 101}))
	assert.Equal(t, saga.Ignored, f.stored("trip-f", legacyStarted{Trip: "f"}), "it does not start again")
	assert.Equal(t, saga.Duplicate, f.again("trip-f", 1))
	assert.Equal(t, saga.Duplicate, f.deliver(0, legacyNoted{Trip: "f", N: 100}))
	require.NoError(t, f.r.LoadDeadlines(f.ctx))
	f.clock.Advance(2 * time.Hour)
	fired, err := f.r.FireDue(f.ctx)
	require.NoError(t, err)
	assert.Zero(t, fired)

	x = f.explain("f")
	assert.Equal(t, uint64(3), x.Version, "no step")
	assert.Equal(t, seen, x.State.Seen)
}
