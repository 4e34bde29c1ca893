package aggregate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

// TestBadInstancesAreRefused: an instance that no Load returned (nil, or
// the zero Instance) is an error naming the instance, not a panic.
func TestBadInstancesAreRefused(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	for what, inst := range map[string]*aggregate.Instance[Tally, *Tally]{
		"nil instance":  nil,
		"zero instance": {},
	} {
		_, err := repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{})
		check.Invalid(t, err, "instance", "Save: "+what)
		_, err = busOf(repo).Refresh(ctx, inst)
		check.Invalid(t, err, "instance", "Refresh: "+what)
		_, _, err = busOf(repo).PriorOutcome(ctx, inst, "c")
		check.Invalid(t, err, "instance", "PriorOutcome: "+what)
		_, _, _, err = busOf(repo).RecentOutcome(ctx, inst, "c")
		check.Invalid(t, err, "instance", "RecentOutcome: "+what)
	}
}

// TestNilEventNamesStreamAndIndex: a decision with a nil event is refused
// naming the stream and the event's index, and nothing is stored.
func TestNilEventNamesStreamAndIndex(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	repo, err := aggregate.NewRepository(store, newRegistry(t), tallyType(t, 0), aggregate.RepositoryOptions{})
	require.NoError(t, err)
	inst, err := repo.Load(context.Background(), "n")
	require.NoError(t, err)
	_, err = repo.Save(context.Background(), inst, []any{Added{N: 1}, nil}, aggregate.SaveOptions{})
	bad := check.Invalid(t, err, "event", "a nil event")
	assert.Equal(t, "tally-n", bad.Stream)
	assert.Equal(t, 1, bad.Index)
	_, err = repo.Save(context.Background(), inst, []any{(*Added)(nil)}, aggregate.SaveOptions{})
	check.Invalid(t, err, "event", "a nil pointer event")
	for _, err := range store.ReadStream(context.Background(), "tally-n", eventstore.Forward(0)) {
		require.NoError(t, err)
		t.Fatal("a refused decision stored events")
	}
}

// TestBadAggregateIDs: an ID that makes no valid stream name is named as
// the aggregate ID, which is what the caller chose, with a short message.
func TestBadAggregateIDs(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	typ := tallyType(t, 0)
	repo, err := aggregate.NewRepository(store, newRegistry(t), typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)
	for _, id := range []string{"", "a\x00", "a\xff", strings.Repeat("i", 600), strings.Repeat("i", 4<<20)} {
		_, err := repo.Load(context.Background(), id)
		check.Invalid(t, err, "aggregate ID", "Load")
		_, err = repo.New(id)
		check.Invalid(t, err, "aggregate ID", "New")
		check.Invalid(t, typ.ValidateID(id), "aggregate ID", "ValidateID")
	}
	require.NoError(t, typ.ValidateID("ok"))
}

// TestTypeErrorsStayShort: a long type name is quoted in part, once.
func TestTypeErrorsStayShort(t *testing.T) {
	_, err := aggregate.NewType[Tally](strings.Repeat("n", 520), aggregate.Options[Tally]{})
	require.ErrorIs(t, err, aggregate.ErrInvalidType)
	assert.LessOrEqual(t, len(err.Error()), 256, err.Error())
	assert.Contains(t, err.Error(), "more than the limit")
}

// FuzzValidateIDAgreesWithTheStore: ValidateID accepts exactly the IDs
// that make a stream name the store accepts.
func FuzzValidateIDAgreesWithTheStore(f *testing.F) {
	for _, id := range []string{"", "ok", "a\x00", "a\xff", "\x7f", "é", "$x", strings.Repeat("i", 505), strings.Repeat("i", 506)} {
		f.Add(id)
	}
	typ := tallyType(f, 0)
	f.Fuzz(func(t *testing.T, id string) {
		want := id != "" && storekit.ValidateStream(typ.Stream(id)) == nil
		assert.Equal(t, want, typ.ValidateID(id) == nil, "ID %q", id)
	})
}
