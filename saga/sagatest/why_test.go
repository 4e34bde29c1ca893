package sagatest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

// fatalRecorder records a scenario's failures; Fatalf ends the goroutine
// that runs the scenario, as testing.T's does.
type fatalRecorder struct {
	recorder
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// scenario runs fn on a recorder in a goroutine of its own, and returns
// what it recorded.
func scenario(t *testing.T, fn func(tb testing.TB)) *fatalRecorder {
	rec := &fatalRecorder{recorder: recorder{TB: t}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec
}

// Command types the sale saga sends by mistake.
type (
	Undeclared   struct{ OrderID string }
	Unregistered struct{ OrderID string }
)

func (c Undeclared) AggregateID() string   { return c.OrderID }
func (c Unregistered) AggregateID() string { return c.OrderID }

// TestThenMethodsSayWhyTheStepParked: issue 23, item 5. A step that
// parked (here: a command not declared with Sends) made ThenCommands say
// only "got (none)"; the cause was in Explain alone. Promise: every Then
// method but ThenParked reports the parked message's error, once.
func TestThenMethodsSayWhyTheStepParked(t *testing.T) {
	reg := registry()
	require.NoError(t, codec.Register[Undeclared](reg, "undeclared", 1))
	sale := saleSaga(reg, time.Minute)
	type Oops struct{ OrderID string }
	require.NoError(t, codec.Register[Oops](reg, "oops", 1))
	require.NoError(t, saga.On(sale, saga.Event[Sale, Oops]{
		Instance: func(e Oops, _ eventstore.Metadata) string { return e.OrderID },
		Handle: func(_ context.Context, _ *Sale, e Oops, out *saga.Output) error {
			out.Send(Undeclared(e))
			return nil
		},
	}))
	rec := scenario(t, func(tb testing.TB) {
		sagatest.New(tb, sale).
			Given(OrderPlaced{OrderID: "o-1"}).
			When(Oops{OrderID: "o-1"}).
			ThenNoCommands().
			ThenNotCompleted()
	})
	require.Len(t, rec.errs, 1, "reported once, by the first Then")
	assert.Contains(t, rec.errs[0], "parked")
	assert.Contains(t, rec.errs[0], "sagatest_test.Undeclared, is not declared with saga.Sends")

	rec = scenario(t, func(tb testing.TB) {
		sagatest.New(tb, saleSaga(registry(), time.Minute)).
			Given(OrderPlaced{OrderID: "o-1"}).
			When(SeatsReserved{OrderID: "o-1"}).
			ThenCommands(MakePayment{OrderID: "o-1"})
	})
	assert.Empty(t, rec.errs, "a step that did not park reports nothing more")
}

// TestNewRefusesASetUpErrorNobodyChecked: issue 23, item 5. Sends of a
// command the codec does not know returned an error that the test
// ignored; the scenario then parked every step that sent it, with a
// message that said the command was not declared. Promise: the type keeps
// its set-up errors, and sagatest.New (as NewRunner does) fails at once,
// naming the cause.
func TestNewRefusesASetUpErrorNobodyChecked(t *testing.T) {
	sale := saleSaga(registry(), time.Minute)
	_ = saga.Sends[Sale, Unregistered](sale) // the error nobody checked
	rec := scenario(t, func(tb testing.TB) {
		sagatest.New(tb, sale).When(OrderPlaced{OrderID: "o-1"})
	})
	assert.Contains(t, rec.fatal, "set-up failed")
	assert.Contains(t, rec.fatal, "sagatest_test.Unregistered is not registered with the codec")
}

// TestScenariosNameTheSourceOfADelivery: issue 23, item 5. Given and When
// deliver each event from a source of its own; GivenDelivered and
// WhenDelivered name the source and sequence, so that duplicates and
// messages out of order can be tested.
func TestScenariosNameTheSourceOfADelivery(t *testing.T) {
	from := func(seq uint64, ev any) saga.Delivery {
		return saga.Delivery{Source: "broker", Sequence: seq, Event: ev}
	}
	sagatest.New(t, saleSaga(registry(), time.Minute)).
		GivenDelivered(from(0, OrderPlaced{OrderID: "o-1"})).
		WhenDelivered(from(0, OrderPlaced{OrderID: "o-1"})).
		ThenNoCommands(). // a duplicate
		WhenDelivered(from(2, PaymentAccepted{OrderID: "o-1"})).
		ThenNoCommands(). // held for #1
		ThenNotCompleted().
		WhenDelivered(from(1, SeatsReserved{OrderID: "o-1"})).
		ThenCommands(MakePayment{OrderID: "o-1"}, ConfirmOrder{OrderID: "o-1"}).
		ThenCompleted()
}
