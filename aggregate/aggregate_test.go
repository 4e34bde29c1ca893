package aggregate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Tally is a minimal aggregate for the package's own tests.
type Tally struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// Add asks a tally to add N.
type Add struct{ N int }

// Added records an addition.
type Added struct {
	N int `json:"n"`
}

func (t *Tally) add(_ context.Context, c Add) ([]any, error) { return []any{Added(c)}, nil }

func (t *Tally) added(e Added) { t.Total += e.N }

func newRegistry(tb testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(tb, codec.Register[Added](reg, "tally.added", 1))
	require.NoError(tb, codec.Register[Tally](reg, "tally.state", 1))
	require.NoError(tb, reg.Validate())
	return reg
}

func tallyType(tb testing.TB, snapshotEvery uint64) *aggregate.Type[Tally, *Tally] {
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{
		New:           func(id string) *Tally { return &Tally{ID: id} },
		SnapshotEvery: snapshotEvery,
	}, aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added))
	require.NoError(tb, err)
	return typ
}

func TestNewTypeRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "order-line", "$system", "bad\x01name", "saga:sale"} {
		_, err := aggregate.NewType[Tally](name, aggregate.Options[Tally]{})
		assert.ErrorIs(t, err, aggregate.ErrInvalidType, "name %q", name)
	}
	typ := tallyType(t, 0)
	assert.Equal(t, "tally-7", typ.Stream("7"))
	assert.Equal(t, eventstore.Category("tally")+"7", typ.Stream("7"), "streams are in the type's category")
	id, ok := typ.ID("tally-7-b")
	assert.True(t, ok)
	assert.Equal(t, "7-b", id, "ID undoes Stream")
	for _, stream := range []string{"tallyx-7", "other-7", "tally-", "tally"} {
		_, ok := typ.ID(stream)
		assert.False(t, ok, "%q is not a tally stream", stream)
	}
}

func TestRepositoryLoadAndSave(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	assert.False(t, inst.Exists)
	assert.Equal(t, "a", inst.State.ID, "the constructor gets the ID")

	out, err := repo.Save(ctx, inst, []any{Added{N: 2}, &Added{N: 3}}, aggregate.SaveOptions{CommandID: "c1"})
	require.NoError(t, err)
	assert.Equal(t, []any{Added{N: 2}, Added{N: 3}}, out.Events)
	assert.Equal(t, 5, inst.State.Total, "saved events are applied")
	assert.Equal(t, uint64(1), inst.Version)

	// A stale instance conflicts and is not changed.
	stale, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	_, err = repo.Save(ctx, stale, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.ErrorIs(t, err, eventstore.ErrWrongVersion)
	assert.Equal(t, 5, stale.State.Total)

	prior, found, err := busOf(repo).PriorOutcome(ctx, stale, "c1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []any{Added{N: 2}, Added{N: 3}}, prior.Events)

	_, err = repo.Load(ctx, "")
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)

	// Every event a tally applies is registered (NewRepository checks), so
	// an unregistered one has no applier either, and is refused as such.
	_, err = repo.Save(ctx, inst, []any{struct{}{}}, aggregate.SaveOptions{})
	assert.ErrorIs(t, err, aggregate.ErrUnknownEvent)
}

func TestPanicErrorUnwrapsErrorValues(t *testing.T) {
	cause := errors.New("boom")
	err := error(&aggregate.PanicError{Stream: "s", Method: "Apply", Value: cause})
	assert.ErrorIs(t, err, cause)
	assert.ErrorIs(t, err, aggregate.ErrPanicked)
}

// TestSaveDuplicateTakesTheStoredDecision saves, on an instance loaded
// before another one saved command c1, a different decision of c1 that
// repeats a prefix of the stored event IDs: the store calls it a
// duplicate, and the outcome and the instance must be what the store holds
// (three events adding 10, 20, 30), not the one event adding 99 given here.
func TestSaveDuplicateTakesTheStoredDecision(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)

	first, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, first, []any{Added{N: 1}}, aggregate.SaveOptions{CommandID: "c0"})
	require.NoError(t, err)
	loser, err := repo.Load(ctx, "a")
	require.NoError(t, err)
	_, err = repo.Save(ctx, first, []any{Added{N: 10}, Added{N: 20}, Added{N: 30}}, aggregate.SaveOptions{CommandID: "c1"})
	require.NoError(t, err)
	_, err = repo.Save(ctx, first, []any{Added{N: 100}}, aggregate.SaveOptions{CommandID: "c2"})
	require.NoError(t, err)

	out, err := repo.Save(ctx, loser, []any{Added{N: 99}}, aggregate.SaveOptions{CommandID: "c1"})
	require.NoError(t, err)
	assert.True(t, out.Duplicate)
	assert.Equal(t, []any{Added{N: 10}, Added{N: 20}, Added{N: 30}}, out.Events, "the stored events")
	assert.Equal(t, [2]uint64{1, 3}, [2]uint64{out.FirstVersion, out.LastVersion}, "the stored command's versions")
	assert.Equal(t, 161, loser.State.Total, "the instance holds the stream's state, c2 included")
	assert.Equal(t, uint64(4), loser.Version)
}
