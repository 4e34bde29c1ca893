package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/busrepo"
)

// Undo is a command that a tally has no handler for, and Removed an event
// it has no applier for.
type (
	Undo    struct{}
	Removed struct {
		N int `json:"n"`
	}
)

// noApply is a handler that decides an event no tally applies.
func noApply(*Tally, context.Context, Undo) ([]any, error) { return []any{Removed{N: 1}}, nil }

// requireSetupError checks that err is a *TypeError of aggregate type
// "tally" about Go type goType, matching sentinel.
func requireSetupError(t *testing.T, err error, sentinel error, goType string) {
	t.Helper()
	require.ErrorIs(t, err, aggregate.ErrInvalidType)
	if sentinel != nil {
		require.ErrorIs(t, err, sentinel)
	}
	var te *aggregate.TypeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "tally", te.Name)
	assert.Equal(t, goType, te.GoType)
	assert.Contains(t, err.Error(), `"tally"`, "the message names the aggregate type")
	assert.Contains(t, err.Error(), goType, "and the Go type")
}

func TestNewTypeRefusesBadBindings(t *testing.T) {
	add, added := aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added)
	for name, tc := range map[string]struct {
		bindings []aggregate.Binding[Tally]
		sentinel error
		goType   string
	}{
		"two handlers for one command": {[]aggregate.Binding[Tally]{add, added, add}, aggregate.ErrDuplicateHandler, "aggregate_test.Add"},
		"two appliers for one event": {[]aggregate.Binding[Tally]{add, added,
			aggregate.Applies(func(*Tally, Added) {})}, aggregate.ErrDuplicateHandler, "aggregate_test.Added"},
		"an interface command type": {[]aggregate.Binding[Tally]{
			aggregate.Handles(func(*Tally, context.Context, fmt.Stringer) ([]any, error) { return nil, nil })}, nil, "fmt.Stringer"},
		"a pointer event type":         {[]aggregate.Binding[Tally]{aggregate.Applies(func(*Tally, *Added) {})}, nil, "*aggregate_test.Added"},
		"an interface event type":      {[]aggregate.Binding[Tally]{aggregate.Applies(func(*Tally, any) {})}, nil, "interface {}"},
		"a nil handler":                {[]aggregate.Binding[Tally]{aggregate.Handles[Tally, Add](nil)}, nil, "aggregate_test.Add"},
		"a nil applier":                {[]aggregate.Binding[Tally]{aggregate.Applies[Tally, Added](nil)}, nil, "aggregate_test.Added"},
		"no bindings, no Handle/Apply": {nil, aggregate.ErrNoHandler, "aggregate_test.Tally"},
	} {
		t.Run(name, func(t *testing.T) {
			typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{}, tc.bindings...)
			assert.Nil(t, typ)
			requireSetupError(t, err, tc.sentinel, tc.goType)
		})
	}
	_, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{}, aggregate.Binding[Tally]{})
	require.ErrorIs(t, err, aggregate.ErrInvalidType, "a zero Binding")
	assert.Contains(t, err.Error(), "aggregate.Handles")
}

// TestApplyTakesAPointerAsItsValue: Type.Apply treats a *E as the E the
// codec stores, as the check before an append does (found by review).
func TestApplyTakesAPointerAsItsValue(t *testing.T) {
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{}, aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added))
	require.NoError(t, err)
	var state Tally
	require.NoError(t, typ.Apply(&state, &Added{N: 2}))
	require.NoError(t, typ.Apply(&state, Added{N: 3}))
	assert.Equal(t, 5, state.Total)
	var missing *Added
	assert.ErrorIs(t, typ.Apply(&state, missing), aggregate.ErrUnknownEvent, "a nil *E is no event")
}

func TestNewRepositoryRefusesAnUnregisteredAppliedEvent(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
		aggregate.Handles((*Tally).add), aggregate.Applies((*Tally).added), aggregate.Applies(func(*Tally, Removed) {}))
	require.NoError(t, err)
	_, err = aggregate.NewRepository(store, newRegistry(t), typ, aggregate.RepositoryOptions{})
	requireSetupError(t, err, codec.ErrUnregisteredType, "aggregate_test.Removed")
}

// TestEventWithoutApplierIsRefusedBeforeTheAppend: a handler that decides
// an event its type cannot apply would make the stream unloadable, so the
// decision is refused and nothing is written.
func TestEventWithoutApplierIsRefusedBeforeTheAppend(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Added](reg, "tally.added", 1))
	require.NoError(t, codec.Register[Removed](reg, "tally.removed", 1))
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
		aggregate.Handles((*Tally).add), aggregate.Handles(noApply), aggregate.Applies((*Tally).added))
	require.NoError(t, err)
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "u")
	require.NoError(t, err)
	events, err := inst.Handle(ctx, Undo{})
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, append([]any{Added{N: 1}}, events...), aggregate.SaveOptions{CommandID: "c1"})
	require.ErrorIs(t, err, aggregate.ErrUnknownEvent)
	var unknown *aggregate.UnknownEventError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, aggregate.UnknownEventError{Aggregate: "tally", Stream: "tally-u", GoType: "aggregate_test.Removed"}, *unknown)
	assert.Equal(t, `aggregate: type "tally" has no applier for event type aggregate_test.Removed (stream "tally-u")`, err.Error())
	_, err = repo.Save(ctx, inst, []any{&Removed{N: 1}}, aggregate.SaveOptions{})
	require.ErrorIs(t, err, aggregate.ErrUnknownEvent, "a *E is checked as the E it is stored as")
	for _, err := range store.ReadStream(ctx, "tally-u", eventstore.Forward(0)) {
		require.NoError(t, err)
		t.Fatal("a refused decision stored events")
	}

	// Stored by other means (an older model), it is an ApplyError on load.
	_, err = repo.Save(ctx, inst, []any{Added{N: 1}}, aggregate.SaveOptions{})
	require.NoError(t, err)
	data, err := reg.EncodeAll(Removed{N: 1})
	require.NoError(t, err)
	_, err = store.Append(ctx, "tally-u", eventstore.Any, data...)
	require.NoError(t, err)
	_, err = repo.Load(ctx, "u")
	var applyErr *aggregate.ApplyError
	require.ErrorAs(t, err, &applyErr)
	assert.Equal(t, "tally-u", applyErr.Stream)
	assert.Equal(t, uint64(1), applyErr.Version)
	assert.Equal(t, "tally.removed", applyErr.Type)
	require.ErrorIs(t, err, aggregate.ErrUnknownEvent)
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "aggregate_test.Removed", unknown.GoType)
}

// TestTypedPanicsAreRecovered: a bound handler's panic names the command
// type it was bound to; a bound applier's is "Apply".
func TestTypedPanicsAreRecovered(t *testing.T) {
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{},
		aggregate.Handles(func(*Tally, context.Context, Add) ([]any, error) { panic("handler bug") }),
		aggregate.Applies(func(*Tally, Added) { panic("applier bug") }))
	require.NoError(t, err)
	var p *aggregate.PanicError
	_, err = typ.Handle(context.Background(), &Tally{}, Add{N: 1})
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "aggregate_test.Add", p.Method)
	assert.Equal(t, "handler bug", p.Value)
	err = typ.Apply(&Tally{}, Added{N: 1})
	require.ErrorAs(t, err, &p)
	assert.Equal(t, "Apply", p.Method)

	_, err = typ.Handle(context.Background(), &Tally{}, Undo{})
	require.ErrorIs(t, err, aggregate.ErrNoHandler, "a command with no handler and no fallback")
	assert.Contains(t, err.Error(), "aggregate_test.Undo")
	require.ErrorIs(t, typ.Apply(&Tally{}, Removed{}), aggregate.ErrUnknownEvent)
}

// Ledger decides and applies through the Aggregate fallback, which stays
// supported: what has no binding goes to Handle and Apply. It never asserts
// a type: every command it is given records one entry.
type Ledger struct{ Entries, Typed int }

func (l *Ledger) Handle(context.Context, any) ([]any, error) { return []any{Added{N: 1}}, nil }
func (l *Ledger) Apply(any) error                            { l.Entries++; return nil }

func TestTheAggregateFallback(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	typ, err := aggregate.NewType[Ledger]("ledger", aggregate.Options[Ledger]{},
		aggregate.Handles(func(*Ledger, context.Context, Undo) ([]any, error) { return nil, errors.New("bound") }),
		aggregate.Applies(func(l *Ledger, _ Removed) { l.Typed++ }))
	require.NoError(t, err)
	assert.True(t, busrepo.CanHandle(typ, nil), "the fallback handles every command type")
	_, err = aggregate.NewRepository(store, newRegistry(t), typ, aggregate.RepositoryOptions{})
	require.ErrorIs(t, err, codec.ErrUnregisteredType, "bound appliers are checked with the fallback too")
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Added](reg, "tally.added", 1))
	require.NoError(t, codec.Register[Removed](reg, "tally.removed", 1))
	repo, err := aggregate.NewRepository(store, reg, typ, aggregate.RepositoryOptions{})
	require.NoError(t, err)

	inst, err := repo.Load(ctx, "l")
	require.NoError(t, err)
	_, err = inst.Handle(ctx, Undo{})
	require.EqualError(t, err, "bound", "a bound handler wins over Handle")
	events, err := inst.Handle(ctx, Add{N: 5})
	require.NoError(t, err)
	_, err = repo.Save(ctx, inst, append(events, Removed{}), aggregate.SaveOptions{})
	require.NoError(t, err)
	assert.Equal(t, Ledger{Entries: 1, Typed: 1}, *inst.State, "Added went to Apply, Removed to its applier")

	_, err = repo.Save(ctx, inst, []any{struct{}{}}, aggregate.SaveOptions{})
	require.ErrorIs(t, err, codec.ErrUnregisteredType, "with a fallback, the codec is what refuses an unknown event")
}

// TestManyBindingsAreFound: past the types it scans, a type finds its
// handlers and appliers by a map, and still refuses a duplicate.
func TestManyBindingsAreFound(t *testing.T) {
	type (
		c0 struct{}
		c1 struct{}
		c2 struct{}
		c3 struct{}
		c4 struct{}
		c5 struct{}
		c6 struct{}
		c7 struct{}
		c8 struct{}
		c9 struct{}
	)
	decide := func(n int) ([]any, error) { return []any{Added{N: n}}, nil }
	bindings := []aggregate.Binding[Tally]{
		aggregate.Handles(func(*Tally, context.Context, c0) ([]any, error) { return decide(0) }),
		aggregate.Handles(func(*Tally, context.Context, c1) ([]any, error) { return decide(1) }),
		aggregate.Handles(func(*Tally, context.Context, c2) ([]any, error) { return decide(2) }),
		aggregate.Handles(func(*Tally, context.Context, c3) ([]any, error) { return decide(3) }),
		aggregate.Handles(func(*Tally, context.Context, c4) ([]any, error) { return decide(4) }),
		aggregate.Handles(func(*Tally, context.Context, c5) ([]any, error) { return decide(5) }),
		aggregate.Handles(func(*Tally, context.Context, c6) ([]any, error) { return decide(6) }),
		aggregate.Handles(func(*Tally, context.Context, c7) ([]any, error) { return decide(7) }),
		aggregate.Handles(func(*Tally, context.Context, c8) ([]any, error) { return decide(8) }),
		aggregate.Handles(func(*Tally, context.Context, c9) ([]any, error) { return decide(9) }),
	}
	cmds := []any{c0{}, c1{}, c2{}, c3{}, c4{}, c5{}, c6{}, c7{}, c8{}, c9{}}
	typ, err := aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{}, append(bindings, aggregate.Applies((*Tally).added))...)
	require.NoError(t, err)
	for n, c := range cmds {
		events, err := typ.Handle(context.Background(), &Tally{}, c)
		require.NoError(t, err)
		assert.Equal(t, []any{Added{N: n}}, events, "command %T", c)
		assert.True(t, busrepo.CanHandle(typ, reflect.TypeOf(c)))
	}
	_, err = aggregate.NewType[Tally]("tally", aggregate.Options[Tally]{}, append(bindings, bindings[9])...)
	require.ErrorIs(t, err, aggregate.ErrDuplicateHandler, "a duplicate past the scanned types")
}
