package saga_test

import (
	"context"
	"errors"
	"sync"
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

// Shelf is an aggregate whose answer to MakeReservation depends on its
// state: refused while closed, accepted once opened.
type Shelf struct {
	Open     bool
	Reserved int
}

// OpenShelf opens a shelf; ShelfOpened records it.
type (
	OpenShelf   struct{ OrderID string }
	ShelfOpened struct{ OrderID string }
)

func (c OpenShelf) AggregateID() string { return c.OrderID }

var (
	errShelfClosed  = errors.New("shelf closed")
	errShelfRefuses = errors.New("shelf: unknown command")
)

func (s *Shelf) open(_ context.Context, c OpenShelf) ([]any, error) {
	return []any{ShelfOpened(c)}, nil
}

func (s *Shelf) reserve(_ context.Context, c MakeReservation) ([]any, error) {
	if !s.Open {
		return nil, errShelfClosed
	}
	return []any{SeatsReserved(c)}, nil
}

func (s *Shelf) opened(ShelfOpened)     { s.Open = true }
func (s *Shelf) reserved(SeatsReserved) { s.Reserved++ }

// TestARejectionStaysFinalAcrossTwoOutboxes runs two runners (two
// processes' outboxes) of one saga type on one store, each with its own
// bus. Runner A sends the instance's MakeReservation, which the closed shelf
// rejects; before A feeds the rejection back, the shelf opens, and runner
// B sends the same record: decided again, the command would now succeed.
// It must not: B meets the recorded rejection and feeds it back, A's
// feed-back is then a duplicate, the rejection handler runs once, and the
// shelf never applies the reservation.
func TestARejectionStaysFinalAcrossTwoOutboxes(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := testRegistry(t)
	require.NoError(t, codec.Register[ShelfOpened](reg, "shelf.opened", 1))
	sale := saleType(t, reg)
	require.NoError(t, saga.OnRejected(sale, func(_ context.Context, s *Sale, _ MakeReservation, reason error, _ *saga.Output) error {
		var rej *saga.RejectedError
		if !errors.As(reason, &rej) {
			return errors.New("the reason is not a RejectedError")
		}
		s.Seen = append(s.Seen, "rejected: "+rej.Reason)
		return nil
	}))
	shelves, err := aggregate.NewType[Shelf]("shelf", aggregate.Options[Shelf]{},
		aggregate.Handles((*Shelf).open), aggregate.Handles((*Shelf).reserve),
		// A shelf takes no payment nor confirmation: the saga's other
		// commands are routed to it only to be refused.
		aggregate.Handles(func(*Shelf, context.Context, MakePayment) ([]any, error) { return nil, errShelfRefuses }),
		aggregate.Handles(func(*Shelf, context.Context, ConfirmOrder) ([]any, error) { return nil, errShelfRefuses }),
		aggregate.Applies((*Shelf).opened), aggregate.Applies((*Shelf).reserved))
	require.NoError(t, err)
	newBus := func(mw ...command.Middleware) *command.Bus {
		b := command.New(store, reg, command.Options{Middleware: mw})
		require.NoError(t, command.Route[MakeReservation](b, shelves))
		require.NoError(t, command.Route[MakePayment](b, shelves))
		require.NoError(t, command.Route[ConfirmOrder](b, shelves))
		require.NoError(t, command.Route[OpenShelf](b, shelves))
		return b
	}
	newRunner := func(b *command.Bus) *saga.Runner[Sale] {
		r, err := saga.NewRunner(sale, store, b, saga.RunnerOptions{Retry: retry.Policy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}, Logger: testLogger(t)})
		require.NoError(t, err)
		return r
	}

	// B's bus reports what B's outbox got back.
	var bGot []error
	busB := newBus(func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			res, err := next.Dispatch(ctx, msg)
			if _, ok := msg.Command.(MakeReservation); ok {
				bGot = append(bGot, err)
			}
			return res, err
		})
	})
	runnerB := newRunner(busB)
	// A's bus, once the shelf has rejected A's dispatch and before A's
	// outbox sees the answer: the shelf opens, and B sends the record.
	var once sync.Once
	busA := newBus(func(next command.Handler) command.Handler {
		return command.HandlerFunc(func(ctx context.Context, msg *command.Message) (command.Result, error) {
			res, err := next.Dispatch(ctx, msg)
			if res.Rejected {
				once.Do(func() {
					_, oerr := busB.Dispatch(ctx, command.Message{ID: "open", Command: OpenShelf{OrderID: "1"}})
					require.NoError(t, oerr)
					require.NoError(t, runnerB.SendRecords(ctx, "1"))
				})
			}
			return res, err
		})
	})
	runnerA := newRunner(busA)

	_, err = runnerA.Deliver(ctx, saga.Delivery{Source: "order-1", Event: OrderPlaced{OrderID: "1"}})
	require.NoError(t, err)
	require.NoError(t, runnerA.SendRecords(ctx, "1"))

	require.Len(t, bGot, 1, "B sent the record's command")
	var recorded *command.RecordedRejectionError
	require.ErrorAs(t, bGot[0], &recorded, "B met A's recorded rejection, not a success on the opened shelf")
	assert.Equal(t, errShelfClosed.Error(), recorded.Reason)

	x, err := runnerA.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "rejected: shelf closed"}, x.State.Seen, "the rejection handler ran once")
	rejected := 0
	for s, err := range runnerA.History(ctx, "1") {
		require.NoError(t, err)
		if s.Kind == "rejected" {
			rejected++
		}
	}
	assert.Equal(t, 1, rejected, "one rejection step")

	repo, err := aggregate.NewRepository(store, reg, shelves, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	shelf, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, Shelf{Open: true}, *shelf.State, "the shelf opened and never applied the reservation")
	var types []string
	for e, err := range store.ReadStream(ctx, "shelf-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		types = append(types, e.Type)
	}
	assert.Equal(t, []string{busrepo.RejectionType, "shelf.opened"}, types)

	// Both outboxes sending again (crashes before their checkpoints)
	// change nothing.
	require.NoError(t, runnerA.SendRecords(ctx, "1"))
	require.NoError(t, runnerB.SendRecords(ctx, "1"))
	again, err := runnerB.Explain(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, x.Version, again.Version, "no new step")
	shelf, err = repo.Load(ctx, "1")
	require.NoError(t, err)
	assert.Zero(t, shelf.State.Reserved)
}
