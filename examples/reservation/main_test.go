package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	v2 "github.com/cairn-es/cairn/examples/reservation/v2"
)

// The sale process is this test binary started again with roleEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == roleSale {
		if err := serveSale(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString("sale: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testConfig is a run that kills its sale process once half the clients'
// messages are in and the board shows an ended order. The payment window
// keeps the orders never paid open, so that the restarted sale has their
// deadlines to fire however late the kill: the board is a projection, and on
// a loaded machine it fell a second behind the sale, which had ended every
// order (a window of one second had passed) when the board showed the first.
func testConfig(t *testing.T, dir string, m model, orders int, seed uint64) config {
	t.Helper()
	return config{data: dir, model: m, orders: orders, clients: 4, workers: 4, pace: 5 * time.Millisecond,
		window: 3 * time.Second, seed: seed, kill: true, out: os.Stdout}
}

// TestVersion1ThenVersion2 runs the example's v1 on a new folder, then v2
// on the same folder, and checks the numbers of both summaries.
func TestVersion1ThenVersion2(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// Version 1: 40 orders, of which (by construction) 4 ask for too many
	// seats, 4 cost more than a card takes and 4 are never paid.
	one, err := run(ctx, testConfig(t, dir, modelV1, 40, 1))
	require.NoError(t, err)
	one.print(os.Stdout)
	h := one.history
	assert.Equal(t, 40, h.Orders)
	assert.Equal(t, map[string]int{"confirmed": 28, "rejected (no seats)": 4, "rejected (payment refused)": 4,
		"rejected (no payment in time)": 4}, h.Ends, "every order in a final state, and the states sum to the orders placed")
	for _, o := range one.orders {
		assert.Equal(t, expect(o), h.ends[o.ID], "order %s (%d seats, %d cents, pays %v)", o.ID, o.Seats, o.AmountCents, o.Pays)
	}
	assert.Equal(t, map[string]int{"confirmed": 28, "rejected: no seats": 4, "rejected: payment refused": 4,
		"rejected: no payment in time": 4}, h.SaleEnds, "the sales' own states agree")
	assert.Equal(t, 4, h.DeadlinesFired-h.DeadlinesLate, "one deadline closed the payment of each order that was never paid")
	assert.Equal(t, map[string]int{"reserved": 36, "not reserved": 4, "cancelled": 8}, h.Seats)
	// A confirmed order's payment starts authorized or requested, whichever
	// came first; the 8 orders refused seats or payment keep an unused
	// authorization; the 4 never paid are requested, then cancelled.
	assert.Equal(t, 28, h.Payments["accepted"])
	assert.Equal(t, 4, h.Payments["cancelled"])
	assert.Equal(t, 28+8+4, h.Payments["authorized"]+h.Payments["requested"])
	assert.Equal(t, 28+8+4+4+28, h.Events["payment"])
	assert.Equal(t, 80, h.Events["order"])
	assert.Equal(t, 4+36+8, h.Events["seats"])
	assert.Equal(t, noSeats(one.orders), ordersOf(one.notReserved), "the not-reserved list is the orders refused seats")

	q := one.queue
	assert.Equal(t, q.Messages, q.Applied, "each client message took effect once")
	assert.Positive(t, q.SentTwice)
	assert.Positive(t, q.Crashed)
	assert.Equal(t, q.SentTwice+q.Crashed, q.Duplicates, "every duplicate was absorbed")
	assert.Positive(t, q.Reordered, "authorizations overtook their orders")
	assert.Equal(t, q.Messages+q.Duplicates+q.PutBack, q.Deliveries)
	assert.Zero(t, q.Refused)
	assert.GreaterOrEqual(t, one.killedAt, q.Messages/2, "the sale was killed once, mid-run")
	assert.Positive(t, one.killedEnded, "after it had ended orders")
	assert.Less(t, one.killedEnded, 40, "and before it had ended them all")
	assert.Positive(t, one.sale.Stats.Handled, "the restarted sale took over")

	// The run's own check catches a broken promise.
	broken := *one
	broken.history = &history{}
	*broken.history = *h
	broken.history.DeadlinesFired++
	assert.ErrorContains(t, broken.check(), "5 payment deadlines fired for 4 orders")

	// Version 2 on the same folder: it reads version 1's history through
	// its upcasters and finds what version 1 saved, then runs 20 orders.
	two, err := run(ctx, testConfig(t, dir, modelV2, 20, 2))
	require.NoError(t, err)
	two.print(os.Stdout)
	assert.Equal(t, "v1", two.savedBy)
	require.NoError(t, sameHistory(h, two.earlier), "v2 reads v1's history as v1 did")
	assert.Equal(t, h.SaleEnds, two.earlier.SaleEnds, "v1's sale states, upcast to v2's, say how each sale ended")
	h2 := two.history
	assert.Equal(t, 60, h2.Orders)
	assert.Equal(t, map[string]int{"confirmed": 42, "rejected (no seats)": 6, "rejected (payment refused)": 6,
		"rejected (no payment in time)": 6}, h2.Ends)
	for _, o := range two.orders {
		assert.Equal(t, expect(o), h2.ends[o.ID], "order %s", o.ID)
	}
	assert.Equal(t, 6, h2.DeadlinesFired-h2.DeadlinesLate)
	assert.Equal(t, 42, h2.Payments["accepted"], "v1's accepted payments, read as Finance's, and v2's")
	assert.Equal(t, h.Events["payment"], h2.Events["payment"], "v2 wrote no payment streams")
	assert.Positive(t, h2.Events["finance"], "v2's payments are in finance streams")
	assert.Equal(t, noSeats(append(one.orders, two.orders...)), ordersOf(two.notReserved))
	assert.Equal(t, two.queue.SentTwice+two.queue.Crashed, two.queue.Duplicates)

	// A v1 payment, read by v2's code, is Finance's event.
	svc, err := openService(ctx, dir, "", modelV2)
	require.NoError(t, err)
	defer svc.close()
	var accepted []any
	for _, o := range one.orders {
		if expect(o).Status != "confirmed" {
			continue
		}
		for ev, err := range svc.store.ReadStream(ctx, domain.Payments.Stream(o.ID), eventstore.Forward(0)) {
			require.NoError(t, err)
			values, err := svc.reg.Decode(ev)
			require.NoError(t, err)
			if e, ok := values[0].Value.(v2.PaymentAccepted); ok {
				accepted = append(accepted, e)
				assert.Equal(t, v2.PaymentAccepted{Account: o.Customer, OrderID: o.ID, AmountCents: o.AmountCents, Currency: "EUR"}, e)
			}
		}
		break
	}
	assert.Len(t, accepted, 1)

	// And version 1 refuses the folder version 2 has written.
	_, err = run(ctx, testConfig(t, dir, modelV1, 1, 3))
	assert.ErrorContains(t, err, "written by v2")
}

func noSeats(orders []order) []string {
	var ids []string
	for _, o := range orders {
		if expect(o).Reason == domain.ReasonNoSeats {
			ids = append(ids, o.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func ordersOf(list []refusal) []string {
	var ids []string
	for _, r := range list {
		ids = append(ids, r.OrderID)
	}
	slices.Sort(ids)
	return ids
}

// A sale process asked to stop while it is still starting (the run ends
// right after it restarted the sale) ends cleanly with its report.
func TestSaleStoppedWhileStartingEndsCleanly(t *testing.T) {
	dir := t.TempDir()
	for range 3 {
		sale, err := startSale(saleConfig{Data: dir, Model: modelV1.name, Window: time.Second}, "")
		require.NoError(t, err)
		report, err := sale.stop()
		require.NoError(t, err)
		assert.Zero(t, report.Applied, "nothing was sent to it")
	}
}
