package saga_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// Sale is the state of the test saga: it remembers what it saw, in order.
type Sale struct {
	OrderID string   `json:"order_id"`
	Seen    []string `json:"seen"`
	Fails   int      `json:"fails"`
}

// The test saga's events.
type (
	OrderPlaced     struct{ OrderID string }
	SeatsReserved   struct{ OrderID string }
	PaymentAccepted struct{ OrderID string }
	// Note carries a number, so that tests can see the order of handling.
	Note struct {
		OrderID string
		Text    string
	}
	// Flaky makes the handler fail while the state's Fails is below Times.
	Flaky struct {
		OrderID string
		Times   int
	}
	// Unordered is mapped with AnyOrder.
	Unordered struct{ OrderID, Text string }
)

// The commands it sends.
type (
	MakeReservation struct{ OrderID string }
	MakePayment     struct{ OrderID string }
	ConfirmOrder    struct{ OrderID string }
)

func (c MakeReservation) AggregateID() string { return c.OrderID }
func (c MakePayment) AggregateID() string     { return c.OrderID }
func (c ConfirmOrder) AggregateID() string    { return c.OrderID }

// PaymentDue is a deadline's payload.
type PaymentDue struct{ Reminder int }

func testRegistry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	for _, err := range []error{
		codec.Register[Sale](reg, "sale.state", 1),
		codec.Register[OrderPlaced](reg, "order.placed", 1),
		codec.Register[SeatsReserved](reg, "seats.reserved", 1),
		codec.Register[PaymentAccepted](reg, "payment.accepted", 1),
		codec.Register[Note](reg, "note", 1),
		codec.Register[Flaky](reg, "flaky", 1),
		codec.Register[Unordered](reg, "unordered", 1),
		codec.Register[MakeReservation](reg, "make.reservation", 1),
		codec.Register[MakePayment](reg, "make.payment", 1),
		codec.Register[ConfirmOrder](reg, "confirm.order", 1),
		codec.Register[PaymentDue](reg, "payment.due", 1),
	} {
		require.NoError(t, err)
	}
	return reg
}

// byOrder is the Instance function of every test event.
func byOrder[E interface{ order() string }](e E, _ eventstore.Metadata) string { return e.order() }

func (e OrderPlaced) order() string     { return e.OrderID }
func (e SeatsReserved) order() string   { return e.OrderID }
func (e PaymentAccepted) order() string { return e.OrderID }
func (e Note) order() string            { return e.OrderID }
func (e Flaky) order() string           { return e.OrderID }
func (e Unordered) order() string       { return e.OrderID }

// saleType declares the test saga on reg.
func saleType(t *testing.T, reg *codec.Registry) *saga.Type[Sale] {
	sale, err := saga.New[Sale]("sale", reg, saga.Options[Sale]{})
	require.NoError(t, err)
	require.NoError(t, saga.Sends[Sale, MakeReservation](sale))
	require.NoError(t, saga.Sends[Sale, MakePayment](sale))
	require.NoError(t, saga.Sends[Sale, ConfirmOrder](sale))
	require.NoError(t, saga.On(sale, saga.Event[Sale, OrderPlaced]{Instance: byOrder[OrderPlaced], Starts: true,
		Handle: func(_ context.Context, s *Sale, e OrderPlaced, out *saga.Output) error {
			s.OrderID = e.OrderID
			s.Seen = append(s.Seen, "placed")
			out.Send(MakeReservation(e))
			out.ScheduleAfter("payment", 15*time.Minute, PaymentDue{Reminder: 1})
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, SeatsReserved]{Instance: byOrder[SeatsReserved],
		Handle: func(_ context.Context, s *Sale, e SeatsReserved, out *saga.Output) error {
			s.Seen = append(s.Seen, "reserved")
			out.Send(MakePayment(e))
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, PaymentAccepted]{Instance: byOrder[PaymentAccepted],
		Handle: func(_ context.Context, s *Sale, e PaymentAccepted, out *saga.Output) error {
			s.Seen = append(s.Seen, "paid")
			out.Cancel("payment")
			out.Send(ConfirmOrder(e))
			out.Complete()
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, Note]{Instance: byOrder[Note], Starts: true,
		Handle: func(_ context.Context, s *Sale, e Note, out *saga.Output) error {
			switch e.Text {
			case "panic":
				panic("boom")
			case "remind":
				out.ScheduleAfter("payment", time.Hour, PaymentDue{Reminder: 2})
			case "forget":
				out.Cancel("payment")
			}
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, Unordered]{Instance: byOrder[Unordered], AnyOrder: true,
		Handle: func(_ context.Context, s *Sale, e Unordered, _ *saga.Output) error {
			s.Seen = append(s.Seen, e.Text)
			return nil
		}}))
	require.NoError(t, saga.On(sale, saga.Event[Sale, Flaky]{Instance: byOrder[Flaky],
		Handle: func(_ context.Context, s *Sale, e Flaky, _ *saga.Output) error {
			if s.Fails < e.Times {
				s.Fails++ // discarded with the failed step: a retry starts from the stored state
				return fmt.Errorf("flaky %d of %d", s.Fails, e.Times)
			}
			s.Seen = append(s.Seen, "flaky")
			return nil
		}}))
	require.NoError(t, saga.OnDeadline(sale, "payment", func(_ context.Context, s *Sale, p PaymentDue, out *saga.Output) error {
		s.Seen = append(s.Seen, fmt.Sprint("due", p.Reminder))
		return nil
	}))
	return sale
}

// fixture is a runner of the test saga on a memory store, with a clock the
// test moves.
type fixture struct {
	store  *memory.Store
	runner *saga.Runner[Sale]
	clock  *sagatest.Clock
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{store: memory.New(), clock: sagatest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	t.Cleanup(func() { _ = f.store.Close() })
	reg := testRegistry(t)
	r, err := saga.NewRunner(saleType(t, reg), f.store, nil, saga.RunnerOptions{
		Clock: f.clock, Logger: testLogger(t), Retry: retry.Policy{Attempts: 3, Initial: time.Microsecond, Max: time.Microsecond},
	})
	require.NoError(t, err)
	f.runner = r
	return f
}

func (f *fixture) deliver(t *testing.T, source string, seq uint64, ev any) saga.Outcome {
	t.Helper()
	out, err := f.runner.Deliver(context.Background(), saga.Delivery{Source: source, Sequence: seq, Event: ev})
	require.NoError(t, err, "delivering #%d of %s", seq, source)
	return out
}

func (f *fixture) explain(t *testing.T, id string) saga.Explanation[Sale] {
	t.Helper()
	x, err := f.runner.Explain(context.Background(), id)
	require.NoError(t, err)
	return x
}

func (f *fixture) history(t *testing.T, id string) []saga.Step {
	t.Helper()
	var out []saga.Step
	for s, err := range f.runner.History(context.Background(), id) {
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// testLogger sends a runner's log to the test's log, shown when it fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
