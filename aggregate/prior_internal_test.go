package aggregate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

type note struct{ n int }

type noted struct {
	N int `json:"n"`
}

func (a *note) Handle(context.Context, any) ([]any, error) { return []any{noted{N: 1}}, nil }
func (a *note) Apply(e any) error                          { a.n += e.(noted).N; return nil }

// TestPriorOutcomeSurvivesHashCollisions plants the hash of one command ID
// on the version of another's events, as a collision would, and hides the
// store's command index: the answer must still be right, found by a scan.
func TestPriorOutcomeSurvivesHashCollisions(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[noted](reg, "note.noted", 1))
	typ, err := NewType[note]("note", Options[note]{})
	require.NoError(t, err)
	repo, err := NewRepository(struct{ eventstore.Store }{mem}, reg, typ, RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "1")
	require.NoError(t, err)
	for _, cmd := range []string{"a", "b", "c"} {
		_, err := repo.Save(ctx, inst, []any{noted{N: 1}, noted{N: 2}}, SaveOptions{CommandID: cmd})
		require.NoError(t, err)
	}
	// "b" is at versions 2-3; pretend "zzz" and "c" hash like "a" does.
	inst.commands[inst.hash("zzz")] = 0
	delete(inst.commands, inst.hash("c"))
	inst.commands[inst.hash("c")] = 0

	_, found, err := repo.PriorOutcome(ctx, inst, "zzz")
	require.NoError(t, err)
	assert.False(t, found, "a colliding hash must not make a new command a duplicate")

	out, found, err := repo.PriorOutcome(ctx, inst, "c")
	require.NoError(t, err)
	require.True(t, found, "a command whose hash collides is still found")
	assert.Equal(t, uint64(4), out.FirstVersion)
	assert.Equal(t, uint64(5), out.LastVersion)
	assert.Equal(t, []any{noted{N: 1}, noted{N: 2}}, out.Events)

	out, found, err = repo.PriorOutcome(ctx, inst, "b")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, [2]uint64{2, 3}, [2]uint64{out.FirstVersion, out.LastVersion})
}
