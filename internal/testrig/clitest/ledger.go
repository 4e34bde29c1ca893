package clitest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// The sagas commands run on a small saga, "ledger", whose instances take
// notes delivered from a source "notes": a note "bad" fails while the
// ledger is broken (and parks), "hello" schedules a reminder, "more"
// sends a Ping whose N says whether the ledger was broken when it was
// decided (so that a redrive after the fix changes it).
type (
	// LedgerState is a ledger instance's state.
	LedgerState struct {
		Seen []string `json:"seen"`
	}
	note struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	ping struct {
		ID string `json:"id"`
		N  int    `json:"n"`
	}
	reminder struct{}
)

func (p ping) AggregateID() string { return p.ID }

// Ledger is the ledger saga on one store: the store, its clock, and
// whether its handlers are broken (what an operator's fix turns off).
type Ledger struct {
	Store  eventstore.Store
	Clock  *sagatest.Clock
	Broken atomic.Bool
}

// Runner makes a runner of the ledger saga on l's store, as the
// service's binary does for each command.
func (l *Ledger) Runner(t testing.TB) *saga.Runner[LedgerState] {
	t.Helper()
	return l.RunnerOn(t, l.Store)
}

// RunnerOn makes a runner of the ledger saga on store.
func (l *Ledger) RunnerOn(t testing.TB, store eventstore.Store) *saga.Runner[LedgerState] {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, errors.Join(
		codec.Register[LedgerState](reg, "ledger.state", 1),
		codec.Register[note](reg, "note", 1),
		codec.Register[ping](reg, "ping", 1),
		codec.Register[reminder](reg, "reminder", 1),
	))
	typ, err := saga.New[LedgerState]("ledger", reg, saga.Options[LedgerState]{})
	require.NoError(t, err)
	require.NoError(t, saga.Sends[LedgerState, ping](typ))
	require.NoError(t, saga.On(typ, saga.Event[LedgerState, note]{
		Instance: func(e note, _ eventstore.Metadata) string { return e.ID },
		Starts:   true,
		Handle: func(_ context.Context, s *LedgerState, e note, out *saga.Output) error {
			switch e.Text {
			case "bad":
				if l.Broken.Load() {
					return errors.New("the ledger is closed")
				}
			case "hello":
				out.ScheduleAfter("reminder", time.Hour, reminder{})
			case "more":
				n := 1
				if !l.Broken.Load() {
					n = 2
				}
				out.Send(ping{ID: e.ID, N: n})
			}
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	require.NoError(t, saga.OnDeadline(typ, "reminder", func(context.Context, *LedgerState, reminder, *saga.Output) error { return nil }))
	r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Clock: l.Clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Retry:  retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}})
	require.NoError(t, err)
	return r
}

// NewLedger builds the ledger's instances on store, broken: a parked on
// its note 1 with note 2 held behind it; b waiting for note 1 (a gap)
// with note 2 held; c that sent a ping; d parked on its note 1; and a
// stored note that names no instance, a dead letter of the saga's
// consumer.
func NewLedger(t testing.TB, store eventstore.Store) *Ledger {
	t.Helper()
	ctx := context.Background()
	l := &Ledger{Store: store, Clock: sagatest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))}
	l.Broken.Store(true)
	r := l.Runner(t)
	_, err := store.Append(ctx, "note-lost", eventstore.NoStream, eventstore.EventData{
		ID: EventID(1000), Type: "note", Data: []byte(`{"id":"","text":"lost"}`)})
	require.NoError(t, err)
	require.NoError(t, r.CatchUp(ctx), "parks the note that names no instance")

	deliver := func(id string, seq uint64, text string, want saga.Outcome) {
		t.Helper()
		out, err := r.Deliver(ctx, saga.Delivery{Source: "notes", Sequence: seq, Event: note{id, text}})
		require.NoError(t, err)
		require.Equal(t, want, out, "%s: note %d %q", id, seq, text)
	}
	deliver("a", 0, "hello", saga.Handled)
	deliver("a", 1, "bad", saga.Parked)
	deliver("a", 2, "after", saga.Held)
	l.Clock.Advance(time.Minute)
	deliver("b", 0, "hello", saga.Handled)
	deliver("b", 2, "late", saga.Held)
	l.Clock.Advance(time.Minute)
	deliver("c", 0, "hello", saga.Handled)
	deliver("c", 1, "more", saga.Handled)
	l.Clock.Advance(time.Minute)
	deliver("d", 0, "hello", saga.Handled)
	deliver("d", 1, "bad", saga.Parked)
	return l
}

// Explain is instance id as a fresh runner reads it from the store.
func (l *Ledger) Explain(t testing.TB, id string) saga.Explanation[LedgerState] {
	t.Helper()
	x, err := l.Runner(t).Explain(context.Background(), id)
	require.NoError(t, err)
	return x
}
