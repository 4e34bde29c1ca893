package sagatest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/saga/sagatest"
)

func TestScenarios(t *testing.T) {
	sale := func() *saga.Type[Sale] { return saleSaga(registry(), 15*time.Minute) }

	t.Run("reserve, then pay", func(t *testing.T) {
		sagatest.New(t, sale()).
			When(OrderPlaced{OrderID: "o-1"}).
			ThenCommands(MakeReservation{OrderID: "o-1"}).
			ThenDeadlines().
			When(SeatsReserved{OrderID: "o-1"}).
			ThenCommands(MakePayment{OrderID: "o-1"}).
			ThenDeadlines("payment").
			When(PaymentAccepted{OrderID: "o-1"}).
			ThenCommands(ConfirmOrder{OrderID: "o-1"}).
			ThenDeadlines().
			ThenCompleted()
	})
	t.Run("no seats", func(t *testing.T) {
		sagatest.New(t, sale()).
			Given(OrderPlaced{OrderID: "o-2"}).
			When(SeatsNotReserved{OrderID: "o-2"}).
			ThenCommands(RejectOrder{OrderID: "o-2", Reason: "no seats"}).
			ThenCompleted()
	})
	t.Run("no payment in time", func(t *testing.T) {
		sagatest.New(t, sale()).
			Given(OrderPlaced{OrderID: "o-3"}, SeatsReserved{OrderID: "o-3"}).
			WhenTimeElapses(14*time.Minute).
			ThenNoCommands().
			ThenNotCompleted().
			WhenTimeElapses(time.Minute).
			ThenCommands(RejectOrder{OrderID: "o-3", Reason: "no payment in time"}, CancelReservation{OrderID: "o-3"}).
			ThenCompleted()
	})
	t.Run("payment rejected", func(t *testing.T) {
		sagatest.New(t, sale()).
			Given(OrderPlaced{OrderID: "o-4"}, SeatsReserved{OrderID: "o-4"}).
			WhenRejected(MakePayment{OrderID: "o-4"}, errors.New("card declined")).
			ThenCommands(RejectOrder{OrderID: "o-4", Reason: "card declined"}, CancelReservation{OrderID: "o-4"})
	})
}

// recorder is a testing.TB that keeps the failures a scenario reports, so
// that a test can check them.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

func TestFailuresAreReadable(t *testing.T) {
	rec := &recorder{TB: t}
	sagatest.New(rec, saleSaga(registry(), time.Minute)).
		When(OrderPlaced{OrderID: "o-9"}).
		ThenCommands(MakePayment{OrderID: "o-9"}).
		ThenDeadlines("payment").
		ThenCompleted()
	require.Len(t, rec.errs, 3)
	assert.Contains(t, rec.errs[0], "! 1. want sagatest_test.MakePayment{OrderID:\"o-9\"}")
	assert.Contains(t, rec.errs[0], "got  sagatest_test.MakeReservation{OrderID:\"o-9\"}")
	assert.Contains(t, rec.errs[1], "want payment")
	assert.Contains(t, rec.errs[2], `instance "o-9" is not complete`)
}

func TestCheckHistoryCatchesAModelChange(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	// The old code runs a few instances and their histories are recorded.
	old, err := saga.NewRunner(saleSaga(registry(), 15*time.Minute), store, nil, saga.RunnerOptions{})
	require.NoError(t, err)
	deliver := func(src string, ev any) {
		_, err := old.Deliver(ctx, saga.Delivery{Source: src, Event: ev})
		require.NoError(t, err)
	}
	deliver("a", OrderPlaced{OrderID: "h-1"})
	// A stored event: the step keeps it by reference, and Export writes it
	// into the history beside the step.
	data, err := registry().Encode(SeatsReserved{OrderID: "h-1"})
	require.NoError(t, err)
	_, err = store.Append(ctx, "seats-h-1", eventstore.NoStream, data)
	require.NoError(t, err)
	for ev, err := range store.ReadStream(ctx, "seats-h-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		out, err := old.HandleStored(ctx, ev)
		require.NoError(t, err)
		require.Equal(t, saga.Handled, out)
	}
	deliver("c", PaymentAccepted{OrderID: "h-1"})
	var file bytes.Buffer
	require.NoError(t, sagatest.WriteHistory(&file, old.Export(ctx, "h-1")))
	recorded := file.String()

	// The instance's stream alone lacks the stored event its step handled.
	rec0 := &recorder{TB: t}
	sagatest.CheckHistory(rec0, saleSaga(registry(), 15*time.Minute), store.ReadStream(ctx, "saga:sale-h-1", eventstore.Forward(0)))
	require.Len(t, rec0.errs, 1, "the step of the stored event cannot be decided without it")
	assert.Contains(t, rec0.errs[0], "is not found where the instance's record names it")

	// The same code decides the same.
	sagatest.CheckHistory(t, saleSaga(registry(), 15*time.Minute), sagatest.ReadHistory(strings.NewReader(recorded)))

	// A change of the payment window shows at the step that set it.
	rec := &recorder{TB: t}
	sagatest.CheckHistory(rec, saleSaga(registry(), 30*time.Minute), sagatest.ReadHistory(strings.NewReader(recorded)))
	require.Len(t, rec.errs, 1, "one step decides differently")
	assert.Contains(t, rec.errs[0], `saga "sale": instance "h-1" (stream "saga:sale-h-1"), step 1 (event seats.reserved`, "the failure names the saga, the instance, its stream and the step")
	assert.Contains(t, rec.errs[0], "recorded:")
}
