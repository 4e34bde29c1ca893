package v2_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate/aggregatetest"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	v2 "github.com/cairn-es/cairn/examples/reservation/v2"
	"github.com/cairn-es/cairn/saga"
	"github.com/cairn-es/cairn/upcast"
)

func registries(t *testing.T) (one, two *codec.Registry) {
	one, two = codec.NewRegistry(codec.Options{}), codec.NewRegistry(codec.Options{})
	require.NoError(t, domain.Register(one))
	require.NoError(t, v2.Register(two))
	require.NoError(t, one.Validate())
	require.NoError(t, two.Validate())
	return one, two
}

// What version 1 wrote is read by version 2 as its own types.
func TestVersion1IsReadAsVersion2(t *testing.T) {
	one, two := registries(t)
	read := func(v any) any {
		raw, err := one.EncodeValue(v)
		require.NoError(t, err)
		got, err := two.DecodeValue(raw)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, v2.PaymentAccepted{Account: "ada", OrderID: "o1", AmountCents: 120_00, Currency: "EUR"},
		read(domain.PaymentAccepted{OrderID: "o1", Customer: "ada", AmountCents: 120_00}), "Payment's event became Finance's")
	assert.Equal(t, v2.PaymentCancelled{Account: "ada", OrderID: "o1"}, read(domain.PaymentCancelled{OrderID: "o1", Customer: "ada"}))
	assert.Equal(t, v2.MakePayment{Account: "ada", OrderID: "o1", AmountCents: 120_00, Currency: "EUR"},
		read(domain.MakePayment{OrderID: "o1", Customer: "ada", AmountCents: 120_00}), "a command a v1 sale recorded")
	for _, c := range []struct {
		v1    domain.Sale
		stage string
	}{
		{domain.Sale{OrderID: "o1", Customer: "ada", AmountCents: 120_00}, v2.StageReserving},
		{domain.Sale{OrderID: "o1", Customer: "ada", AmountCents: 120_00, Reserved: true}, v2.StagePaying},
		{domain.Sale{OrderID: "o1", Customer: "ada", AmountCents: 120_00, Reserved: true, Outcome: "confirmed"}, v2.StageConfirmed},
		{domain.Sale{OrderID: "o1", Customer: "ada", AmountCents: 120_00, Outcome: domain.RejectedOutcome(domain.ReasonNoSeats)}, "rejected: no seats"},
	} {
		assert.Equal(t, v2.Sale{OrderID: "o1", Account: "ada", AmountCents: 120_00, Stage: c.stage}, read(c.v1), "%+v", c.v1)
	}
}

// A state that lost its customer is an error naming the field, not a
// sale without an account.
func TestABadVersion1StateIsAnError(t *testing.T) {
	_, two := registries(t)
	_, err := two.DecodeValue(upcast.Raw{Type: "sale.state", Version: 1, Data: json.RawMessage(`{"order_id":"o1"}`)})
	assert.ErrorContains(t, err, `no "customer" field`)
}

// A sale that version 1 left waiting for its payment is finished by
// version 2: its state is upcast, and Finance's PaymentAccepted confirms
// the order.
func TestVersion2FinishesASaleVersion1Started(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	one, two := registries(t)
	old, err := domain.NewSale(one, domain.SaleOptions{})
	require.NoError(t, err)
	r1, err := saga.NewRunner(old, store, nil, saga.RunnerOptions{})
	require.NoError(t, err)
	for i, e := range []any{
		domain.OrderPlaced{OrderID: "o1", Customer: "ada", Seats: 2, AmountCents: 120_00},
		domain.SeatsReserved{OrderID: "o1", Customer: "ada", Seats: 2},
	} {
		out, err := r1.Deliver(ctx, saga.Delivery{Source: []string{"order-o1", "seats-o1"}[i], Sequence: 0, Event: e})
		require.NoError(t, err)
		require.Equal(t, saga.Handled, out)
	}

	sale, err := v2.NewSale(two, domain.SaleOptions{})
	require.NoError(t, err)
	r2, err := saga.NewRunner(sale, store, nil, saga.RunnerOptions{})
	require.NoError(t, err)
	x, err := r2.Explain(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, &v2.Sale{OrderID: "o1", Account: "ada", AmountCents: 120_00, Stage: v2.StagePaying}, x.State)
	require.Len(t, x.Deadlines, 1, "v1's payment deadline is still pending")

	out, err := r2.Deliver(ctx, saga.Delivery{Source: "finance-ada", Sequence: 0,
		Event: v2.PaymentAccepted{Account: "ada", OrderID: "o1", AmountCents: 120_00, Currency: "EUR"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out)
	x, err = r2.Explain(ctx, "o1")
	require.NoError(t, err)
	assert.True(t, x.Completed)
	assert.Equal(t, v2.StageConfirmed, x.State.Stage)
	assert.Empty(t, x.Deadlines, "confirming cancels the deadline")
	require.Len(t, x.LastStep.Commands, 1)
	assert.Equal(t, domain.ConfirmOrder{OrderID: "o1"}, x.LastStep.Commands[0].Command)

	// Version 2's history of the sale reads version 1's steps, commands
	// included.
	var kinds []string
	for step, err := range r2.History(ctx, "o1") {
		require.NoError(t, err)
		kinds = append(kinds, step.Kind+" "+step.Type)
		if step.Type == "seats.reserved" {
			require.Len(t, step.Commands, 1)
			assert.Equal(t, v2.MakePayment{Account: "ada", OrderID: "o1", AmountCents: 120_00, Currency: "EUR"}, step.Commands[0].Command)
		}
	}
	assert.Equal(t, []string{"event order.placed", "event seats.reserved", "event finance.payment-accepted"}, kinds)
}

// Finance keeps version 1's rules per order, in one account.
func TestFinanceKeepsEachOrdersPayment(t *testing.T) {
	_, two := registries(t)
	ask := v2.MakePayment{Account: "ada", OrderID: "o2", AmountCents: 80_00, Currency: "EUR"}
	aggregatetest.For(t, v2.Accounts).WithID("ada").WithCodec(two).
		Given(v2.PaymentAccepted{Account: "ada", OrderID: "o1", AmountCents: 120_00, Currency: "EUR"}).
		When(ask).Then(v2.PaymentRequested(ask))
	aggregatetest.For(t, v2.Accounts).WithID("ada").WithCodec(two).
		Given(v2.PaymentRequested(ask)).When(v2.AuthorizePayment{Account: "ada", OrderID: "o2"}).Then(v2.PaymentAccepted(ask))
	aggregatetest.For(t, v2.Accounts).WithID("ada").
		Given(v2.PaymentRequested(ask), v2.PaymentAccepted(ask)).When(v2.CancelPayment{Account: "ada", OrderID: "o2"}).
		ThenError(domain.ErrPaymentTaken)
}
