package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Review28Money's IsZero reports "no amount"; encoding/json's omitzero
// calls it, and so drops a zero amount's currency.
type Review28Money struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func (m Review28Money) IsZero() bool { return m.Amount == 0 }

type (
	Review28Priced struct {
		Price Review28Money `json:"price,omitzero"`
	}
	Review28Quoted struct {
		Rate json.Number `json:"rate"`
	}
)

type Review28Ledger struct {
	Currency string
	Rate     json.Number
}

func (l *Review28Ledger) Handle(_ context.Context, cmd any) ([]any, error) { return cmd.([]any), nil }

func (l *Review28Ledger) Apply(event any) error {
	switch e := event.(type) {
	case Review28Priced:
		l.Currency = e.Price.Currency
	case Review28Quoted:
		l.Rate = e.Rate
	default:
		return errors.New("unknown event")
	}
	return nil
}

func review28Repo(t *testing.T) (*aggregate.Repository[Review28Ledger, *Review28Ledger], eventstore.Store) {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Review28Priced](reg, "r28.priced", 1))
	require.NoError(t, codec.Register[Review28Quoted](reg, "r28.quoted", 1))
	typ, err := aggregate.NewType[Review28Ledger]("r28ledger", aggregate.Options[Review28Ledger]{})
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	return repo, store
}

// TestReview28SaveStateDiffersFromReplay: Save applies the events as given
// because codec.Registry.RoundTrip calls their round trip exact, yet the
// stored JSON decodes to other values (omitzero calls the field type's
// IsZero method; an empty json.Number is written as 0). The instance the
// caller (or the bus's cache) keeps then differs from what a Load builds.
func TestReview28SaveStateDiffersFromReplay(t *testing.T) {
	ctx := context.Background()
	repo, _ := review28Repo(t)
	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	out, err := repo.Save(ctx, inst, []any{
		Review28Priced{Price: Review28Money{Amount: 0, Currency: "EUR"}},
		Review28Quoted{Rate: ""},
	}, aggregate.SaveOptions{})
	require.NoError(t, err)

	replayed, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, replayed.State, inst.State, "the state after Save is the state a replay builds")
	assert.Equal(t, []any{Review28Priced{}, Review28Quoted{Rate: "0"}}, out.Events, "Outcome.Events are the values a replay applies")
}

// TestReview28NewRefusedWhenStreamExists: an instance from New saved over
// an existing stream is refused with a WrongVersionError, with and without
// a command ID, and nothing is appended.
func TestReview28NewRefusedWhenStreamExists(t *testing.T) {
	ctx := context.Background()
	repo, store := review28Repo(t)
	first, err := repo.New("1")
	require.NoError(t, err)
	_, err = repo.Save(ctx, first, []any{Review28Quoted{Rate: "1"}}, aggregate.SaveOptions{CommandID: "c1"})
	require.NoError(t, err)

	for _, cmd := range []string{"", "c2", "c1"} {
		again, err := repo.New("1")
		require.NoError(t, err)
		out, err := repo.Save(ctx, again, []any{Review28Quoted{Rate: "2"}}, aggregate.SaveOptions{CommandID: cmd})
		if cmd == "c1" {
			// The same command's decision repeated at the same place (version
			// 0) is the store's idempotent repeat: a duplicate, not a refusal.
			require.NoError(t, err)
			assert.True(t, out.Duplicate)
			assert.Equal(t, []any{Review28Quoted{Rate: "1"}}, out.Events)
			continue
		}
		var wrong *eventstore.WrongVersionError
		require.ErrorAs(t, err, &wrong, "command %q", cmd)
	}
	n := 0
	for _, err := range store.ReadStream(ctx, "r28ledger-1", eventstore.Forward(0)) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 1, n)

	_, err = repo.New("")
	assert.Error(t, err)
	_, err = repo.New("$x\x00")
	assert.Error(t, err)
}

// TestReview28SnapshotPersistsTheAppliedState: with snapshots, the state
// Save built from the value as given (see
// TestReview28SaveStateDiffersFromReplay) is written to the snapshot, so
// every later load from it disagrees with a replay of the stream for good.
func TestReview28SnapshotPersistsTheAppliedState(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Review28Priced](reg, "r28.priced", 1))
	require.NoError(t, codec.Register[Review28Quoted](reg, "r28.quoted", 1))
	require.NoError(t, codec.Register[Review28Ledger](reg, "r28.ledger", 1))
	typ, err := aggregate.NewType[Review28Ledger]("r28ledger", aggregate.Options[Review28Ledger]{SnapshotEvery: 1})
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	inst, err := repo.New("1")
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, []any{Review28Priced{Price: Review28Money{Amount: 0, Currency: "EUR"}}}, aggregate.SaveOptions{})
	require.NoError(t, err)

	fromSnapshot, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	noSnaps, err := aggregate.NewRepository(struct{ eventstore.Store }{store}, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	replayed, err := noSnaps.Load(ctx, "1")
	require.NoError(t, err)
	assert.Equal(t, replayed.State.Currency, fromSnapshot.State.Currency, "a load from the snapshot builds the state a replay builds")
}
