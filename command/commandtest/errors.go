package commandtest

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
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

// unroutedBindings give a counter type a handler for unrouted and
// *unrouted, which the suite routes to test routing errors.
var unroutedBindings = append(CounterBindings(),
	aggregate.Handles(func(*Counter, context.Context, unrouted) ([]any, error) { return nil, nil }),
	aggregate.Handles(func(*Counter, context.Context, *unrouted) ([]any, error) { return nil, nil }),
)

func (c unrouted) AggregateID() string { return c.ID }

func testRouting(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	_, err := b.Dispatch(context.Background(), command.Message{Command: unrouted{ID: e.id("x")}})
	var nr *command.NoRouteError
	check.ErrorAs(t, err, &nr)
	check.ErrorIs(t, err, command.ErrNoRoute)
	check.Contains(t, err.Error(), "commandtest.unrouted", "the error names the command type")

	_, err = b.Dispatch(context.Background(), command.Message{})
	check.Invalid(t, err, "Message.Command", "a message without a command")

	// A pointer is another Go type: no route, rather than a guess.
	_, err = b.Dispatch(context.Background(), command.Message{Command: &Increment{ID: e.id("x")}})
	check.ErrorIs(t, err, command.ErrNoRoute)

	err = command.Route[Increment](b, counterType(t, 0))
	check.ErrorIs(t, err, command.ErrDuplicateRoute, "routing a command type twice")
	var re *command.RouteError
	check.ErrorAs(t, err, &re)
	check.Contains(t, err.Error(), "Increment")
	check.Contains(t, err.Error(), `"counter"`)

	lone, err := aggregate.NewType[Counter]("lonecounter", aggregate.Options[Counter]{}, CounterBindings()...)
	check.NoError(t, err)
	err = command.Route[unrouted](b, lone)
	check.ErrorIs(t, err, command.ErrDuplicateRoute, "a command type the aggregate type has no handler for")
	check.ErrorIs(t, err, aggregate.ErrNoHandler)
	check.Contains(t, err.Error(), "commandtest.unrouted", "the error names the command type")
	check.Contains(t, err.Error(), `"lonecounter"`, "and the aggregate type")
	check.Contains(t, err.Error(), "*commandtest.Counter does not implement aggregate.Aggregate")

	second, err := aggregate.NewType[Counter]("counter", aggregate.Options[Counter]{}, unroutedBindings...)
	check.NoError(t, err)
	err = command.Route[unrouted](b, second)
	check.ErrorIs(t, err, command.ErrDuplicateRoute, "a second aggregate type named counter")
	check.True(t, !errors.Is(err, aggregate.ErrNoHandler), "a second type named counter is not a missing handler: ", err)

	err = command.Route[command.Command](b, counterType(t, 0))
	check.ErrorIs(t, err, command.ErrDuplicateRoute, "an interface type can never match a command")

	// A nil pointer command is refused before its AggregateID is called.
	pb := e.bus(command.Options{}, 0)
	ptrType, err := aggregate.NewType[Counter]("ptrcounter", aggregate.Options[Counter]{}, unroutedBindings...)
	check.NoError(t, err)
	check.NoError(t, command.Route[*unrouted](pb, ptrType))
	_, err = pb.Dispatch(context.Background(), command.Message{Command: (*unrouted)(nil)})
	check.Invalid(t, err, "Message.Command", "a nil pointer command")
	check.Contains(t, err.Error(), "*commandtest.unrouted")

	// A route to a nil aggregate type is refused, not a panic.
	err = command.Route[unrouted, Counter](pb, nil)
	check.Invalid(t, err, "aggregate type", "a route to a nil aggregate type")

	// Snapshots of a type the codec cannot encode are refused at set-up.
	other, err := aggregate.NewType[Counter]("othercounter", aggregate.Options[Counter]{SnapshotEvery: 10}, unroutedBindings...)
	check.NoError(t, err)
	empty := codec.NewRegistry(codec.Options{})
	err = command.Route[unrouted](command.New(e.store, empty, command.Options{Snapshots: e.snaps}), other)
	check.ErrorIs(t, err, aggregate.ErrSnapshotNotRegistered)
	check.Len(t, e.events(e.id("x")), 0, "routing errors write nothing")
}

func testHandleError(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	id := e.id("rej")
	res, err := b.Dispatch(context.Background(), command.Message{ID: "r", Command: Reject{ID: id}})
	check.True(t, err == ErrRejected, "want the aggregate's own error, unchanged, got %v (%T)", err, err)
	check.True(t, res.Rejected, "the result says the aggregate refused it")
	check.Len(t, e.events(id), 0)
	// The bus goes on serving the aggregate.
	res, err = b.Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	check.NoError(t, err)
	check.True(t, !res.Rejected)
	check.Equal(t, e.load(id).Count, 1)
}

func testHandlePanic(t testing.TB, e *env) {
	b := e.bus(command.Options{}, 0)
	id := e.id("boom")
	res, err := b.Dispatch(context.Background(), command.Message{Command: Explode{ID: id}})
	check.ErrorIs(t, err, aggregate.ErrPanicked)
	check.True(t, !res.Rejected, "a panic is not the aggregate's answer")
	var pe *aggregate.PanicError
	check.ErrorAs(t, err, &pe)
	check.Equal(t, pe.Method, "commandtest.Explode", "a bound handler is named by the command type it decides")
	check.Equal(t, pe.Stream, "counter-"+id)
	check.True(t, len(pe.Stack) > 0)
	check.Len(t, e.events(id), 0)
}

// appendRaw appends event values to a counter's stream behind the bus's
// back, as an older or buggy writer would.
func (e *env) appendRaw(id string, values ...any) {
	e.t.Helper()
	data, err := e.reg.EncodeAll(values...)
	check.NoError(e.t, err)
	_, err = e.store.Append(context.Background(), "counter-"+id, eventstore.Any, data...)
	check.NoError(e.t, err)
}

func testApplyUnknownEvent(t testing.TB, e *env) {
	id := e.id("poison")
	e.appendRaw(id, Incremented{By: 1}, Poisoned{})
	for _, noCache := range []bool{false, true} {
		b := e.bus(command.Options{NoCache: noCache}, 0)
		_, err := b.Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
		check.ErrorIs(t, err, aggregate.ErrApplyFailed)
		check.ErrorIs(t, err, aggregate.ErrUnknownEvent, "the aggregate's own reason is kept")
		var ae *aggregate.ApplyError
		check.ErrorAs(t, err, &ae)
		check.Equal(t, ae.Stream, "counter-"+id)
		check.Equal(t, ae.Version, uint64(1))
		check.Equal(t, ae.Type, "counter.poisoned")
		check.Contains(t, err.Error(), "counter.poisoned")
	}
	check.Len(t, e.events(id), 2, "nothing appended after a failed load")
}

func testApplyPanic(t testing.TB, e *env) {
	id := e.id("bomb")
	e.appendRaw(id, Bomb{})
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	check.ErrorIs(t, err, aggregate.ErrApplyFailed)
	check.ErrorIs(t, err, aggregate.ErrPanicked)
	var pe *aggregate.PanicError
	check.ErrorAs(t, err, &pe)
	check.Equal(t, pe.Method, "Apply")
}

func testUnregisteredStoredType(t testing.TB, e *env) {
	id := e.id("alien")
	_, err := e.store.Append(context.Background(), "counter-"+id, eventstore.NoStream,
		eventstore.EventData{Type: "alien.landed", SchemaVersion: 1, Data: []byte(`{}`)})
	check.NoError(t, err)
	_, err = e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	check.ErrorIs(t, err, codec.ErrUnknownType)
	var de *codec.DecodeError
	check.ErrorAs(t, err, &de)
	check.Equal(t, de.Stream, "counter-"+id)
	check.Equal(t, de.Version, uint64(0))
	check.Equal(t, de.Type, "alien.landed")
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

func testConflictsBounded(t testing.TB, e *env) {
	store := &conflictingStore{Store: e.store}
	b := e.busOn(store, command.Options{Retry: retry.Policy{Attempts: 3, Initial: 1, Max: 1}}, 0)
	res, err := b.Dispatch(context.Background(), command.Message{Command: Increment{ID: e.id("c")}})
	check.ErrorIs(t, err, eventstore.ErrWrongVersion)
	var wv *eventstore.WrongVersionError
	check.ErrorAs(t, err, &wv)
	check.Equal(t, wv.Stream, "counter-"+e.id("c"))
	check.Equal(t, res.Attempts, 3)
	check.Equal(t, store.appends, 3, "decided and appended Retry.Attempts times")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.Dispatch(ctx, command.Message{Command: Increment{ID: e.id("c")}})
	check.True(t, errors.Is(err, context.Canceled), "a canceled context ends the dispatch: %v", err)
}

func testEmptyAggregateID(t testing.TB, e *env) {
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{Command: Increment{}})
	check.ErrorIs(t, err, eventstore.ErrInvalidArgument)
}
