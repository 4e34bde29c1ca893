package aggregate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

// Fragile is a tally whose applier panics on negative additions: a bug
// that only shows once such an event is stored.
type Fragile struct{ Tally }

func (f *Fragile) added(e Added) {
	if e.N < 0 {
		panic("negative addition")
	}
	f.Total += e.N
}

func TestApplyPanicAfterAppendIsAnError(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	typ, err := aggregate.NewType[Fragile]("fragile", aggregate.Options[Fragile]{}, aggregate.Applies((*Fragile).added))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, newRegistry(t), typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "f1")
	require.NoError(t, err)
	var out aggregate.Outcome
	require.NotPanics(t, func() {
		out, err = repo.Save(ctx, inst, []any{Added{N: -1}}, aggregate.SaveOptions{CommandID: "c1"})
	})
	var applyErr *aggregate.ApplyError
	require.ErrorAs(t, err, &applyErr, "a panic while applying a just-stored event is an ApplyError")
	assert.Equal(t, "fragile-f1", applyErr.Stream)
	assert.Equal(t, uint64(0), applyErr.Version)
	var panicked *aggregate.PanicError
	require.True(t, errors.As(err, &panicked), "and it carries the recovered panic: %v", err)
	assert.Equal(t, "Apply", panicked.Method)
	assert.Equal(t, uint64(0), out.LastVersion, "the outcome says what was stored")

	// The event is stored; loading now reports it instead of panicking.
	_, err = repo.Load(ctx, "f1")
	require.ErrorAs(t, err, &applyErr)
	stored := 0
	for _, err := range store.ReadStream(ctx, "fragile-f1", eventstore.Forward(0)) {
		require.NoError(t, err)
		stored++
	}
	assert.Equal(t, 1, stored)
}
