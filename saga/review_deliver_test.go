package saga_test

// Adversarial review of the saga rewrite (issue 20): deliveries from a
// broker that reorders (Delivery.Sequence: "A message above the next
// expected one is held until the missing ones arrive"; docs/sagas.md "Held
// messages ... A broker that reorders").

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
)

type (
	reorderPlaced struct{ ID string }
	reorderPaid   struct{ ID string }
	reorderState  struct{ Seen []string }
)

// TestReviewEarlyDeliveryBeforeTheStartIsHeld: a broker delivers an
// order's messages out of order: "paid" (#1 of its source, a type that
// cannot start an instance) before "placed" (#0, which starts it). #1 is
// above the next expected sequence, so by the Delivery doc it is early and
// held; instead Deliver answers Ignored (with a nil error, so the caller
// acknowledges it to its broker), stores nothing, and when #0 starts the
// instance, #1 is gone: the payment is never handled. Promise
// (Delivery.Sequence: "A message above the next expected one is held until
// the missing ones arrive"; Deliver: "early messages held until their
// turn"). The cause: saga/decide.go engine.decide returns ignored for a
// message that cannot start an instance that does not exist, before it
// looks at the sequence; an early one (seq above 0 of a source the
// instance never took from) could be held like a starting one.
func TestReviewEarlyDeliveryBeforeTheStartIsHeld(t *testing.T) {
	ctx := edgeContext(t)
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[reorderState](reg, "reorder.state", 1))
	require.NoError(t, codec.Register[reorderPlaced](reg, "reorder.placed", 1))
	require.NoError(t, codec.Register[reorderPaid](reg, "reorder.paid", 1))
	typ, err := saga.New[reorderState]("reorder", reg, saga.Options[reorderState]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(typ, saga.Event[reorderState, reorderPlaced]{Starts: true,
		Instance: func(e reorderPlaced, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *reorderState, e reorderPlaced, _ *saga.Output) error {
			s.Seen = append(s.Seen, "placed")
			return nil
		}}))
	require.NoError(t, saga.On(typ, saga.Event[reorderState, reorderPaid]{
		Instance: func(e reorderPaid, _ eventstore.Metadata) string { return e.ID },
		Handle: func(_ context.Context, s *reorderState, e reorderPaid, _ *saga.Output) error {
			s.Seen = append(s.Seen, "paid")
			return nil
		}}))
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	r, err := saga.NewRunner(typ, store, nil, saga.RunnerOptions{Logger: testLogger(t)})
	require.NoError(t, err)

	out, err := r.Deliver(ctx, saga.Delivery{Source: "orders", Sequence: 1, Event: reorderPaid{ID: "o1"}})
	require.NoError(t, err)
	assert.Equal(t, saga.Held, out, "#1 is early: #0 has not arrived (got %s)", out)
	out, err = r.Deliver(ctx, saga.Delivery{Source: "orders", Sequence: 0, Event: reorderPlaced{ID: "o1"}})
	require.NoError(t, err)
	require.Equal(t, saga.Handled, out)
	x, err := r.Explain(ctx, "o1")
	require.NoError(t, err)
	assert.Equal(t, []string{"placed", "paid"}, x.State.Seen, "the payment is handled in its turn")
}
