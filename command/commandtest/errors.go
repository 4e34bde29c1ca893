package commandtest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/retry"
)

var errorTests = []test{
	{"Routing", testRouting},
	{"HandleErrorUnchanged", testHandleError},
	{"HandlePanic", testHandlePanic},
	{"ApplyUnknownEvent", testApplyUnknownEvent},
	{"ApplyPanic", testApplyPanic},
	{"UnregisteredStoredType", testUnregisteredStoredType},
	{"ConflictsAreBounded", testConflictsBounded},
	{"EmptyAggregateID", testEmptyAggregateID},
	{"BadMessages", testBadMessages},
}

type unrouted struct{ ID string }

func (c unrouted) AggregateID() string { return c.ID }

func testRouting(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	_, err := b.Dispatch(context.Background(), command.Message{Command: unrouted{ID: e.id("x")}})
	var nr *command.NoRouteError
	require.ErrorAs(t, err, &nr)
	assert.ErrorIs(t, err, command.ErrNoRoute)
	assert.Contains(t, err.Error(), "commandtest.unrouted", "the error names the command type")

	_, err = b.Dispatch(context.Background(), command.Message{})
	storetest.RequireInvalid(t, err, "Message.Command", "a message without a command")

	// A pointer is another Go type: no route, rather than a guess.
	_, err = b.Dispatch(context.Background(), command.Message{Command: &Increment{ID: e.id("x")}})
	assert.ErrorIs(t, err, command.ErrNoRoute)

	err = command.Route[Increment](b, counterType(t, 0))
	assert.ErrorIs(t, err, command.ErrDuplicateRoute, "routing a command type twice")
	var re *command.RouteError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, err.Error(), "Increment")
	assert.Contains(t, err.Error(), `"counter"`)

	err = command.Route[unrouted](b, counterType(t, 0))
	assert.ErrorIs(t, err, command.ErrDuplicateRoute, "a second aggregate type named counter")

	err = command.Route[command.Command](b, counterType(t, 0))
	assert.ErrorIs(t, err, command.ErrDuplicateRoute, "an interface type can never match a command")

	// A nil pointer command is refused before its AggregateID is called.
	pb := e.bus(command.Options{}, 0)
	ptrType, err := aggregate.NewType[Counter]("ptrcounter", aggregate.Options[Counter]{})
	require.NoError(t, err)
	require.NoError(t, command.Route[*unrouted](pb, ptrType))
	_, err = pb.Dispatch(context.Background(), command.Message{Command: (*unrouted)(nil)})
	storetest.RequireInvalid(t, err, "Message.Command", "a nil pointer command")
	assert.Contains(t, err.Error(), "*commandtest.unrouted")

	// A route to a nil aggregate type is refused, not a panic.
	err = command.Route[unrouted, Counter](pb, nil)
	storetest.RequireInvalid(t, err, "aggregate type", "a route to a nil aggregate type")

	// Snapshots of a type the codec cannot encode are refused at set-up.
	other, err := aggregate.NewType[Counter]("othercounter", aggregate.Options[Counter]{SnapshotEvery: 10})
	require.NoError(t, err)
	empty := codec.NewRegistry(codec.Options{})
	err = command.Route[unrouted](command.New(e.store, empty, command.Options{Snapshots: e.snaps}), other)
	assert.ErrorIs(t, err, aggregate.ErrSnapshotNotRegistered)
	assert.Empty(t, e.events(e.id("x")), "routing errors write nothing")
}

func testHandleError(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	id := e.id("rej")
	res, err := b.Dispatch(context.Background(), command.Message{ID: "r", Command: Reject{ID: id}})
	assert.Same(t, ErrRejected, err, "the aggregate's own error, unchanged")
	assert.True(t, res.Rejected, "the result says the aggregate refused it")
	assert.Empty(t, e.events(id))
	// The bus goes on serving the aggregate.
	res, err = b.Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	require.NoError(t, err)
	assert.False(t, res.Rejected)
	assert.Equal(t, 1, e.load(id).Count)
}

func testHandlePanic(t *testing.T, e *env) {
	b := e.bus(command.Options{}, 0)
	id := e.id("boom")
	res, err := b.Dispatch(context.Background(), command.Message{Command: Explode{ID: id}})
	require.ErrorIs(t, err, aggregate.ErrPanicked)
	assert.False(t, res.Rejected, "a panic is not the aggregate's answer")
	var pe *aggregate.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "Handle", pe.Method)
	assert.Equal(t, "counter-"+id, pe.Stream)
	assert.NotEmpty(t, pe.Stack)
	assert.Empty(t, e.events(id))
}

// appendRaw appends event values to a counter's stream behind the bus's
// back, as an older or buggy writer would.
func (e *env) appendRaw(id string, values ...any) {
	e.t.Helper()
	data, err := e.reg.EncodeAll(values...)
	require.NoError(e.t, err)
	_, err = e.store.Append(context.Background(), "counter-"+id, eventstore.Any, data...)
	require.NoError(e.t, err)
}

func testApplyUnknownEvent(t *testing.T, e *env) {
	id := e.id("poison")
	e.appendRaw(id, Incremented{By: 1}, Poisoned{})
	for _, noCache := range []bool{false, true} {
		b := e.bus(command.Options{NoCache: noCache}, 0)
		_, err := b.Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
		require.ErrorIs(t, err, aggregate.ErrApplyFailed)
		assert.ErrorIs(t, err, aggregate.ErrUnknownEvent, "the aggregate's own reason is kept")
		var ae *aggregate.ApplyError
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, "counter-"+id, ae.Stream)
		assert.Equal(t, uint64(1), ae.Version)
		assert.Equal(t, "counter.poisoned", ae.Type)
		assert.Contains(t, err.Error(), "counter.poisoned")
	}
	assert.Len(t, e.events(id), 2, "nothing appended after a failed load")
}

func testApplyPanic(t *testing.T, e *env) {
	id := e.id("bomb")
	e.appendRaw(id, Bomb{})
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	require.ErrorIs(t, err, aggregate.ErrApplyFailed)
	require.ErrorIs(t, err, aggregate.ErrPanicked)
	var pe *aggregate.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "Apply", pe.Method)
}

func testUnregisteredStoredType(t *testing.T, e *env) {
	id := e.id("alien")
	_, err := e.store.Append(context.Background(), "counter-"+id, eventstore.NoStream,
		eventstore.EventData{Type: "alien.landed", SchemaVersion: 1, Data: []byte(`{}`)})
	require.NoError(t, err)
	_, err = e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	require.ErrorIs(t, err, codec.ErrUnknownType)
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "counter-"+id, de.Stream)
	assert.Equal(t, uint64(0), de.Version)
	assert.Equal(t, "alien.landed", de.Type)
}

// conflictingStore fails every append with a version conflict, as if
// another process always got there first.
type conflictingStore struct {
	eventstore.Store
	appends int
}

func (s *conflictingStore) Append(_ context.Context, stream string, expected eventstore.ExpectedVersion, _ ...eventstore.EventData) (eventstore.AppendResult, error) {
	s.appends++
	return eventstore.AppendResult{}, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: eventstore.Exact(99)}
}

func testConflictsBounded(t *testing.T, e *env) {
	store := &conflictingStore{Store: e.store}
	b := e.busOn(store, command.Options{Retry: retry.Policy{Attempts: 3, Initial: 1, Max: 1}}, 0)
	res, err := b.Dispatch(context.Background(), command.Message{Command: Increment{ID: e.id("c")}})
	require.ErrorIs(t, err, eventstore.ErrWrongVersion)
	var wv *eventstore.WrongVersionError
	require.ErrorAs(t, err, &wv)
	assert.Equal(t, "counter-"+e.id("c"), wv.Stream)
	assert.Equal(t, 3, res.Attempts)
	assert.Equal(t, 3, store.appends, "decided and appended Retry.Attempts times")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.Dispatch(ctx, command.Message{Command: Increment{ID: e.id("c")}})
	assert.True(t, errors.Is(err, context.Canceled), "a canceled context ends the dispatch: %v", err)
}

func testEmptyAggregateID(t *testing.T, e *env) {
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{}})
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}
