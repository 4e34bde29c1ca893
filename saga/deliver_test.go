package saga_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/saga"
)

func TestStepRecordsStateCommandsAndDeadlines(t *testing.T) {
	f := newFixture(t)
	assert.Equal(t, saga.Handled, f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"}))

	x := f.explain(t, "1")
	require.True(t, x.Exists)
	assert.Equal(t, "saga:sale-1", x.Stream)
	assert.Equal(t, []string{"placed"}, x.State.Seen)
	assert.Equal(t, map[string]uint64{"order-1": 0}, x.Watermarks)
	require.Len(t, x.Deadlines, 1)
	assert.Equal(t, "payment", x.Deadlines[0].Name)
	assert.Equal(t, f.clock.Now().Add(15*time.Minute), x.Deadlines[0].At)
	require.Len(t, x.LastStep.Commands, 1)
	assert.Equal(t, MakeReservation{OrderID: "1"}, x.LastStep.Commands[0].Command)

	// The command ID is the same whenever this step is decided: a second
	// runner (another process) on the same store derives the same one.
	other := newFixture(t)
	other.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	assert.Equal(t, x.LastStep.Commands[0].ID, other.explain(t, "1").LastStep.Commands[0].ID)

	assert.Equal(t, saga.Handled, f.deliver(t, "payment-1", 0, PaymentAccepted{OrderID: "1"}))
	x = f.explain(t, "1")
	assert.True(t, x.Completed)
	assert.Empty(t, x.Deadlines, "a cancelled deadline is no longer pending")
	assert.Equal(t, saga.Ignored, f.deliver(t, "note-1", 0, Note{OrderID: "1", Text: "late"}), "a complete instance ignores messages")
	assert.Len(t, f.history(t, "1"), 2, "one record per step, none for the ignored message")
}

func TestDuplicatesAreDroppedByTheSourceWatermark(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "a"})
	f.deliver(t, "notes", 1, Note{OrderID: "1", Text: "b"})
	for _, seq := range []uint64{0, 1, 0} {
		assert.Equal(t, saga.Duplicate, f.deliver(t, "notes", seq, Note{OrderID: "1", Text: "again"}))
	}
	assert.Equal(t, saga.Duplicate, f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"}))
	assert.Equal(t, []string{"placed", "a", "b"}, f.explain(t, "1").State.Seen)
	assert.Len(t, f.history(t, "1"), 3, "a duplicate stores nothing")
}

func TestEarlyMessagesAreHeldUntilTheirTurn(t *testing.T) {
	f := newFixture(t)
	// Three sources, each delivering out of order and with repeats.
	deliveries := []struct {
		source string
		seq    uint64
		text   string
	}{
		{"a", 2, "a2"}, {"b", 1, "b1"}, {"a", 0, "a0"}, {"c", 0, "c0"}, {"a", 2, "a2"},
		{"b", 0, "b0"}, {"c", 2, "c2"}, {"a", 1, "a1"}, {"c", 1, "c1"}, {"b", 1, "b1"},
	}
	for _, d := range deliveries {
		_, err := f.runner.Deliver(context.Background(), saga.Delivery{Source: d.source, Sequence: d.seq, Event: Note{OrderID: "1", Text: d.text}})
		require.NoError(t, err)
	}
	x := f.explain(t, "1")
	assert.Empty(t, x.Held)
	assert.Equal(t, map[string]uint64{"a": 2, "b": 1, "c": 2}, x.Watermarks)
	seen := map[string][]string{}
	for _, s := range x.State.Seen {
		seen[s[:1]] = append(seen[s[:1]], s)
	}
	assert.Equal(t, []string{"a0", "a1", "a2"}, seen["a"], "each source in sequence order")
	assert.Equal(t, []string{"b0", "b1"}, seen["b"])
	assert.Equal(t, []string{"c0", "c1", "c2"}, seen["c"])
	assert.Len(t, x.State.Seen, 8, "every message once")
}

func TestAGapThatNeverFillsIsExplainedAndCanBeReleased(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "topic", 0, Note{OrderID: "1", Text: "t0"})
	f.clock.Advance(time.Minute)
	assert.Equal(t, saga.Held, f.deliver(t, "topic", 3, Note{OrderID: "1", Text: "t3"}))
	assert.Equal(t, saga.Held, f.deliver(t, "topic", 2, Note{OrderID: "1", Text: "t2"}))
	assert.Equal(t, saga.Duplicate, f.deliver(t, "topic", 3, Note{OrderID: "1", Text: "t3"}), "a held message is not held twice")
	assert.Equal(t, saga.Handled, f.deliver(t, "unordered", 5, Unordered{OrderID: "1", Text: "u5"}), "AnyOrder types do not wait")

	x := f.explain(t, "1")
	require.Len(t, x.Held, 2)
	for _, h := range x.Held {
		assert.Equal(t, uint64(1), h.WaitsFor, "held #%d waits for #1", h.Sequence)
		assert.Equal(t, f.clock.Now(), h.Since)
	}
	assert.Equal(t, []string{"t0", "u5"}, x.State.Seen)

	require.NoError(t, f.runner.Release(context.Background(), "1", "topic", 1))
	x = f.explain(t, "1")
	assert.Empty(t, x.Held)
	assert.Equal(t, []string{"t0", "u5", "t2", "t3"}, x.State.Seen)
	assert.Equal(t, saga.Duplicate, f.deliver(t, "topic", 1, Note{OrderID: "1", Text: "t1"}), "the released gap stays closed")
	err := f.runner.Release(context.Background(), "1", "topic", 1)
	assert.ErrorIs(t, err, saga.ErrStale, "the gap was released already")
	err = f.runner.Release(context.Background(), "1", "topic", 4)
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument, "nothing is held from that source")
}

func TestAFailingMessageIsParkedForItsInstanceOnly(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	f.deliver(t, "order-2", 0, OrderPlaced{OrderID: "2"})
	assert.Equal(t, saga.Parked, f.deliver(t, "flaky-1", 0, Flaky{OrderID: "1", Times: 100}))
	assert.Equal(t, saga.Held, f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "behind"}), "later messages wait behind the parked one")
	assert.Equal(t, saga.Handled, f.deliver(t, "notes", 0, Note{OrderID: "2", Text: "other"}), "other instances go on")

	x := f.explain(t, "1")
	require.NotNil(t, x.Parked)
	assert.Equal(t, "event", x.Parked.Kind)
	assert.Equal(t, 3, x.Parked.Attempts)
	assert.Contains(t, x.Parked.Error, "flaky 1 of 100", "every attempt starts from the stored state")
	require.Len(t, x.Held, 1)

	parked := x.Parked.ID
	out, err := f.runner.Retry(context.Background(), "1", parked)
	require.NoError(t, err)
	assert.Equal(t, saga.Parked, out)
	assert.Equal(t, 6, f.explain(t, "1").Parked.Attempts, "a failed retry counts its attempts")

	require.NoError(t, f.runner.Skip(context.Background(), "1", parked))
	x = f.explain(t, "1")
	assert.Nil(t, x.Parked)
	assert.Empty(t, x.Held)
	assert.Equal(t, []string{"placed", "behind"}, x.State.Seen, "the held message ran after the skip")
	assert.Equal(t, saga.Duplicate, f.deliver(t, "flaky-1", 0, Flaky{OrderID: "1"}), "a skipped message counts as handled")
	_, err = f.runner.Retry(context.Background(), "1", parked)
	assert.ErrorIs(t, err, saga.ErrNotParked)
	assert.ErrorIs(t, err, saga.ErrStale)
}

func TestARetriedParkedMessageRunsThenTheHeldOnes(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	// Fails 3 times (parked), then succeeds on the operator's retry: the
	// failed attempts are not stored, so Fails stays 0 and Times 0 passes.
	assert.Equal(t, saga.Parked, f.deliver(t, "flaky-1", 0, Flaky{OrderID: "1", Times: 3}))
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "n0"})
	x := f.explain(t, "1")
	require.NotNil(t, x.Parked)
	assert.Equal(t, 0, x.State.Fails)
}

func TestHandlerPanicsAndBadMessagesAreErrorsNotCrashes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "s", Event: Note{OrderID: ""}})
	require.ErrorIs(t, err, saga.ErrHandlerFailed)
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "empty instance ID")

	_, err = f.runner.Deliver(ctx, saga.Delivery{Source: "s", Event: struct{ X int }{}})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "an unmapped type")

	_, err = f.runner.Deliver(ctx, saga.Delivery{Source: "s", Event: (*Note)(nil)})
	require.Error(t, err, "a nil event")

	for _, source := range []string{"", "$system"} {
		_, err = f.runner.Deliver(ctx, saga.Delivery{Source: source, Event: Note{OrderID: "1"}})
		require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "source %q", source)
	}

	out, err := f.runner.Deliver(ctx, saga.Delivery{Source: "s", Event: &Note{OrderID: "1", Text: "pointer"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out, "a pointer to a mapped type is delivered as the value")
	assert.Equal(t, saga.Ignored, f.deliver(t, "r", 0, SeatsReserved{OrderID: "nobody"}), "an event that cannot start an instance is ignored")
	assert.Equal(t, saga.Parked, f.deliver(t, "s", 1, Note{OrderID: "1", Text: "panic"}), "a panicking handler is a failing one")
	assert.Contains(t, f.explain(t, "1").Parked.Error, "handler panicked: boom")
	x := f.explain(t, "nobody")
	assert.False(t, x.Exists, "and stores nothing")
}
