package saga_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/retry"
	"github.com/cairn-es/cairn/saga"
)

// Order is the aggregate the test saga's commands go to. An order whose ID
// starts with "soldout" refuses reservations.
type Order struct {
	Reserved, Paid, Confirmed int
}

var errSoldOut = errors.New("sold out")

func (o *Order) reserve(_ context.Context, c MakeReservation) ([]any, error) {
	if strings.HasPrefix(c.OrderID, "soldout") {
		return nil, errSoldOut
	}
	return []any{SeatsReserved(c)}, nil
}

func (o *Order) pay(_ context.Context, c MakePayment) ([]any, error) {
	return []any{PaymentAccepted(c)}, nil
}

func (o *Order) confirm(_ context.Context, c ConfirmOrder) ([]any, error) {
	return []any{Note{OrderID: c.OrderID, Text: "confirmed"}}, nil
}

// orderBindings bind the test saga's commands to an Order's methods, and
// count the events applied; the tests append OrderPlaced to order streams
// themselves, and the order takes it as it is.
var orderBindings = []aggregate.Binding[Order]{
	aggregate.Handles((*Order).reserve),
	aggregate.Handles((*Order).pay),
	aggregate.Handles((*Order).confirm),
	aggregate.Applies(func(o *Order, _ SeatsReserved) { o.Reserved++ }),
	aggregate.Applies(func(o *Order, _ PaymentAccepted) { o.Paid++ }),
	aggregate.Applies(func(o *Order, _ Note) { o.Confirmed++ }),
	aggregate.Applies(func(*Order, OrderPlaced) {}),
}

// outboxFixture runs the test saga with a bus that routes its commands to
// Order aggregates, and a rejection handler that counts compensations.
type outboxFixture struct {
	store  *memory.Store
	bus    *command.Bus
	runner *saga.Runner[Sale]
	repo   *aggregate.Repository[Order, *Order]
}

func newOutboxFixture(t *testing.T) *outboxFixture {
	f := &outboxFixture{store: memory.New()}
	t.Cleanup(func() { _ = f.store.Close() })
	reg := testRegistry(t)
	sale := saleType(t, reg)
	require.NoError(t, saga.OnRejected(sale, func(_ context.Context, s *Sale, cmd MakeReservation, reason error, out *saga.Output) error {
		var rej *saga.RejectedError
		if !errors.As(reason, &rej) {
			return errors.New("the reason is not a RejectedError")
		}
		s.Seen = append(s.Seen, "rejected: "+rej.Reason)
		out.Complete()
		return nil
	}))
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	f.bus = command.New(f.store, reg, command.Options{})
	require.NoError(t, command.Route[MakeReservation](f.bus, orders))
	require.NoError(t, command.Route[MakePayment](f.bus, orders))
	require.NoError(t, command.Route[ConfirmOrder](f.bus, orders))
	f.repo, err = aggregate.NewRepository(f.store, reg, orders, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	f.runner, err = saga.NewRunner(sale, f.store, f.bus, saga.RunnerOptions{Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}, Logger: testLogger(t)})
	require.NoError(t, err)
	return f
}

func (f *outboxFixture) order(t *testing.T, id string) *Order {
	t.Helper()
	inst, err := f.repo.Load(context.Background(), id)
	require.NoError(t, err)
	return inst.State
}

func TestOutboxSendsEachCommandOnceAcrossResends(t *testing.T) {
	f := newOutboxFixture(t)
	ctx := context.Background()
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "order-1", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	for range 3 { // the outbox crashed before its checkpoint: it sends again
		require.NoError(t, f.runner.SendRecords(ctx, "1"))
	}
	assert.Equal(t, 1, f.order(t, "1").Reserved, "one reservation, however often the record is sent")
}

func TestARejectionIsFedBackOnceAndIsFinal(t *testing.T) {
	f := newOutboxFixture(t)
	ctx := context.Background()
	_, err := f.runner.Deliver(ctx, saga.Delivery{Source: "order-soldout1", Event: OrderPlaced{OrderID: "soldout1"}})
	require.NoError(t, err)
	require.NoError(t, f.runner.SendRecords(ctx, "soldout1"))
	x, err := f.runner.Explain(ctx, "soldout1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "rejected: sold out"}, x.State.Seen, "the rejection reached the handler once")
	assert.True(t, x.Completed)
	steps := 0
	for s, err := range f.runner.History(ctx, "soldout1") {
		require.NoError(t, err)
		steps++
		if s.Kind == "rejected" {
			assert.Equal(t, "make.reservation", s.Type)
		}
	}
	assert.Equal(t, 2, steps)

	// Sending the records again (a crash before the outbox's checkpoint)
	// sends nothing that was rejected: the rejection is final.
	require.NoError(t, f.runner.SendRecords(ctx, "soldout1"))
	x, err = f.runner.Explain(ctx, "soldout1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "rejected: sold out"}, x.State.Seen)
	assert.Equal(t, x.Version, uint64(1), "no new step")
	var types []string
	for e, err := range f.store.ReadStream(ctx, "order-soldout1", eventstore.Forward(0)) {
		require.NoError(t, err)
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{busrepo.RejectionType}, types, "the rejected command never took effect: its stream holds only the recorded rejection")
}

func TestASagaThatSendsAnUnroutedCommandFailsAtSetUp(t *testing.T) {
	reg := testRegistry(t)
	sale := saleType(t, reg)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	bus := command.New(store, reg, command.Options{})
	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{}, orderBindings...)
	require.NoError(t, err)
	require.NoError(t, command.Route[MakeReservation](bus, orders))
	_, err = saga.NewRunner(sale, store, bus, saga.RunnerOptions{})
	require.ErrorIs(t, err, saga.ErrInvalidSetup)
	assert.Contains(t, err.Error(), "does not route")
}

func TestMisdeclarationsFailAtSetUp(t *testing.T) {
	reg := testRegistry(t)
	sale := saleType(t, reg)
	err := saga.On(sale, saga.Event[Sale, Note]{Instance: byOrder[Note], Handle: func(context.Context, *Sale, Note, *saga.Output) error { return nil }})
	require.ErrorIs(t, err, saga.ErrInvalidSetup)
	assert.Contains(t, err.Error(), "mapped twice")

	type Unregistered struct{ OrderID string }
	err = saga.On(sale, saga.Event[Sale, Unregistered]{Instance: func(Unregistered, eventstore.Metadata) string { return "" },
		Handle: func(context.Context, *Sale, Unregistered, *saga.Output) error { return nil }})
	require.ErrorIs(t, err, saga.ErrInvalidSetup)
	assert.Contains(t, err.Error(), "not registered with the codec")

	err = saga.OnDeadline(sale, "payment", func(context.Context, *Sale, PaymentDue, *saga.Output) error { return nil })
	assert.ErrorIs(t, err, saga.ErrInvalidSetup, "a deadline handled twice")

	_, err = saga.New[struct{ X int }]("other", reg, saga.Options[struct{ X int }]{})
	assert.ErrorIs(t, err, saga.ErrInvalidSetup, "an unregistered state type")
	_, err = saga.New[Sale]("bad-name", reg, saga.Options[Sale]{})
	assert.ErrorIs(t, err, saga.ErrInvalidSetup)
	_, err = saga.New[Sale]("sale", codec.NewRegistry(codec.Options{}), saga.Options[Sale]{})
	assert.ErrorIs(t, err, saga.ErrInvalidSetup)
}
