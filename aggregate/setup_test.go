package aggregate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/upcast"
)

// brokenRegistry has an upcaster chain with a gap: version 1 of
// "tally.added" is upcast to 2, but nothing takes 2 to the current 3.
func brokenRegistry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Added](reg, "tally.added", 3))
	require.NoError(t, reg.Upcast(upcast.Transform("tally.added", 1, func(r upcast.Raw) (upcast.Raw, error) { return r, nil })))
	return reg
}

func TestNewRepositoryRefusesABrokenRegistry(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })

	_, err := aggregate.NewRepository(store, brokenRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.ErrorIs(t, err, codec.ErrInvalidSetup, "the set-up error shows when the repository is made, not at the first load")
	require.ErrorIs(t, err, upcast.ErrGap)
	require.ErrorIs(t, err, aggregate.ErrInvalidType)
	assert.Contains(t, err.Error(), `"tally"`, "the error names the aggregate type")
	assert.Contains(t, err.Error(), `"tally.added"`, "and the event type whose chain is broken")

	_, err = aggregate.NewRepository[Tally](nil, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "a nil store")
	_, err = aggregate.NewRepository(store, nil, tallyType(t, 0), aggregate.RepositoryOptions{})
	require.ErrorIs(t, err, eventstore.ErrInvalidArgument, "a nil registry")
}

// busOf is the command bus's view of repo, through which these tests reach
// what only the bus uses: outcome lookups, refresh and recorded
// rejections.
func busOf[T any, PT aggregate.Root[T]](repo *aggregate.Repository[T, PT]) busrepo.Repo[*aggregate.Instance[T, PT]] {
	return busrepo.For[*aggregate.Instance[T, PT]](repo)
}
