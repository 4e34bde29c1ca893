package saga_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (f *fixture) fire(t *testing.T, after time.Duration) int {
	t.Helper()
	f.clock.Advance(after)
	n, err := f.runner.FireDue(context.Background())
	require.NoError(t, err)
	return n
}

func TestADeadlineFiresOnceWhenDue(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	assert.Zero(t, f.fire(t, 14*time.Minute), "not due yet")
	assert.Equal(t, 1, f.fire(t, time.Minute))
	assert.Zero(t, f.fire(t, time.Hour), "a deadline fires once")
	x := f.explain(t, "1")
	assert.Equal(t, []string{"placed", "due1"}, x.State.Seen)
	assert.Empty(t, x.Deadlines)
	assert.Equal(t, "deadline", x.LastStep.Kind)
	assert.Len(t, x.LastStep.Deadline, 36, "a deadline's ID is a UUID, of fixed size")
}

func TestACancelledDeadlineNeverFires(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "forget"})
	assert.Zero(t, f.fire(t, 24*time.Hour))
	assert.Equal(t, []string{"placed", "forget"}, f.explain(t, "1").State.Seen)
}

func TestARescheduledDeadlineFiresOnlyAtItsNewTime(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"}) // due in 15 minutes
	f.deliver(t, "notes", 0, Note{OrderID: "1", Text: "remind"})
	assert.Zero(t, f.fire(t, 30*time.Minute), "the first schedule was replaced")
	assert.Equal(t, 1, f.fire(t, 30*time.Minute))
	assert.Equal(t, []string{"placed", "remind", "due2"}, f.explain(t, "1").State.Seen)
}

func TestADeadlineDueWhileParkedFiresAfterTheParkedMessageIsResolved(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.deliver(t, "order-1", 0, OrderPlaced{OrderID: "1"})
	f.deliver(t, "flaky", 0, Flaky{OrderID: "1", Times: 100})
	assert.Zero(t, f.fire(t, time.Hour), "the instance is parked: its deadline waits")
	assert.Len(t, f.explain(t, "1").Deadlines, 1, "and stays pending")
	require.NoError(t, f.runner.Skip(ctx, "1", f.explain(t, "1").Parked.ID))
	assert.Equal(t, 1, f.fire(t, 0))
	assert.Equal(t, []string{"placed", "due1"}, f.explain(t, "1").State.Seen)
}

func TestManyPendingDeadlinesFireInTimeOrder(t *testing.T) {
	f := newFixture(t)
	const n = 2000
	for i := range n {
		f.deliver(t, "order-o"+itoa(i), 0, OrderPlaced{OrderID: "o" + itoa(i)})
	}
	assert.Zero(t, f.fire(t, 14*time.Minute))
	st, err := f.runner.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, n, st.DeadlinesPending)
	assert.Equal(t, f.clock.Now().Add(time.Minute), st.NextDeadline)
	assert.Equal(t, int64(n), st.Handled)
	assert.Equal(t, n, f.fire(t, time.Minute))
	assert.Zero(t, f.fire(t, time.Minute))
	st, err = f.runner.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.DeadlinesPending)
	assert.True(t, st.NextDeadline.IsZero())
}

func itoa(i int) string { return strconv.Itoa(i) }
