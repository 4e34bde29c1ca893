package flowtest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/internal/testrig/flowtest"
	"github.com/cairn-es/cairn/internal/testrig/reservation"
)

func TestSeeded(t *testing.T) {
	a, b := flowtest.Seeded(7, 20), flowtest.Seeded(7, 20)
	require.Equal(t, a, b, "a seed gives the same orders every time")
	assert.NotEqual(t, a, flowtest.Seeded(8, 20))
	ends := make(map[reservation.Outcome]bool)
	for _, o := range a[:4] {
		ends[reservation.Expect(o.Seats, o.AmountCents)] = true
	}
	assert.Len(t, ends, 4, "the first four orders end in four different ways: %v", a[:4])
	assert.Positive(t, flowtest.Deadlines(a))
}

// TestCheck runs the flow to its end in this process and checks it; then
// it breaks the store in the ways Check must see: an event twice, a read
// model row counted twice, an order that was never placed.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	orders := flowtest.Seeded(3, 8)
	cfg := flowtest.Config{Store: flowtest.SQLite(path), Orders: orders, Epoch: time.Unix(1_700_000_000, 0), Finish: true, ReadModel: true}
	require.NoError(t, flowtest.Run(ctx, cfg))

	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	tally, err := flowtest.Check(ctx, s, orders, nil, true)
	require.NoError(t, err)
	require.True(t, tally.Valid(), "%+v", tally)
	assert.Equal(t, flowtest.Tally{Attempts: 8, Acknowledged: 8, Applied: 8}, tally)

	// An order never placed is lost.
	missing := append(orders, flowtest.Order{ID: "o999", Seats: 1, AmountCents: 10})
	tally, err = flowtest.Check(ctx, s, missing, map[string]bool{"o000": true}, true)
	require.NoError(t, err)
	assert.Equal(t, 1, tally.Lost, "%v", tally.Problems)
	assert.Equal(t, 1, tally.Acknowledged)
	assert.False(t, tally.Valid())

	// An event appended twice (another command ID) is a duplicate.
	first := orders[0]
	_, err = s.Append(ctx, "order-"+first.ID, eventstore.Any, eventstore.EventData{ID: eventstore.NewEventID(), Type: "order.placed",
		SchemaVersion: 1, Data: []byte(`{"order_id":"` + first.ID + `"}`), Metadata: eventstore.Metadata{CommandID: "again"}})
	require.NoError(t, err)
	tally, err = flowtest.Check(ctx, s, orders, nil, true)
	require.NoError(t, err)
	assert.Equal(t, 1, tally.Duplicated, "%v", tally.Problems)
	assert.Contains(t, tally.Problems[0], "order-"+first.ID+" holds 3 events, not 2")
	assert.Contains(t, tally.Problems[0], "did not count", "the read model never saw the extra event")

	// A read model row counted twice is a duplicate.
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE flowtest_counts SET n = 2 WHERE stream = ?`, "seats-"+orders[1].ID)
		return err
	}))
	tally, err = flowtest.Check(ctx, s, orders, nil, true)
	require.NoError(t, err)
	assert.Equal(t, 2, tally.Duplicated, "%v", tally.Problems)
	assert.Contains(t, tally.Problems[1], "counted seats-"+orders[1].ID+" #0")
}
