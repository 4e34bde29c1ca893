package aggregate

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
)

// Binding ties one command type to the function that decides it, or one
// event type to the function that applies it, for aggregates of Go type T.
// Make them with [Handles] and [Applies], and give them to [NewType]: a
// type's bindings are fixed when it is made, so none can be added while
// commands are being decided.
type Binding[T any] struct {
	goType reflect.Type
	event  bool
	handle func(*T, context.Context, any) ([]any, error)
	apply  func(*T, any)
}

// Handles binds commands of Go type C to h, which decides what such a
// command means for the aggregate in its current state, as
// [Aggregate.Handle] does: it returns the events that record the decision,
// or an error that rejects the command, and must not change the aggregate.
// A method expression fits:
//
//	func (o *Order) Place(ctx context.Context, c PlaceOrder) ([]any, error)
//
//	aggregate.Handles((*Order).Place)
//
// Commands are routed by their dynamic Go type, so C must not be an
// interface type; [NewType] refuses one.
func Handles[T, C any](h func(*T, context.Context, C) ([]any, error)) Binding[T] {
	b := Binding[T]{goType: reflect.TypeFor[C]()}
	if h != nil {
		b.handle = func(state *T, ctx context.Context, cmd any) ([]any, error) { return h(state, ctx, cmd.(C)) }
	}
	return b
}

// Applies binds events of Go type E to a, which evolves the aggregate by
// one such event, as [Aggregate.Apply] does. A method expression fits:
//
//	func (o *Order) Placed(e OrderPlaced)
//
//	aggregate.Applies((*Order).Placed)
//
// An applier cannot fail: an event with no applier is the type's to
// report (it wraps [ErrUnknownEvent]), and an event the state cannot take
// is a bug, best a panic, which is recovered into a [*PanicError] inside
// the [*ApplyError] of the load that met it. The codec decodes events as
// values of their registered type, never as pointers, so E must be a
// concrete, non-pointer type; [NewType] refuses others.
func Applies[T, E any](a func(*T, E)) Binding[T] {
	b := Binding[T]{goType: reflect.TypeFor[E](), event: true}
	if a != nil {
		b.apply = func(state *T, event any) { a(state, event.(E)) }
	}
	return b
}

// bind adds the bindings to t, refusing the first that is wrong.
func (t *Type[T, PT]) bind(bindings []Binding[T]) error {
	for _, b := range bindings {
		bad := func(sentinel error, format string, args ...any) error {
			return &TypeError{Name: t.name, GoType: fmt.Sprint(b.goType), Err: sentinel, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case b.goType == nil:
			return bad(nil, "a zero Binding: make bindings with aggregate.Handles and aggregate.Applies")
		case !b.event && b.handle == nil:
			return bad(nil, "the handler for command type %s is nil", b.goType)
		case b.event && b.apply == nil:
			return bad(nil, "the applier for event type %s is nil", b.goType)
		case b.goType.Kind() == reflect.Interface && !b.event:
			return bad(nil, "command type %s is an interface type; commands are dispatched by their concrete Go type", b.goType)
		case b.event && (b.goType.Kind() == reflect.Interface || b.goType.Kind() == reflect.Pointer):
			return bad(nil, "event type %s is not a concrete value type; the codec decodes events as values of their registered type, never as pointers or interfaces", b.goType)
		}
		if b.event {
			if !t.appliers.add(b.goType, b.apply) {
				return bad(ErrDuplicateHandler, "two appliers for event type %s", b.goType)
			}
			continue
		}
		if !t.handlers.add(b.goType, b.handle) {
			return bad(ErrDuplicateHandler, "two handlers for command type %s", b.goType)
		}
	}
	if len(bindings) == 0 && !t.fallback {
		// Appliers alone are a type too: one a Repository loads and
		// saves without the bus, whose Route refuses each command type
		// the type has no handler for.
		var zero T
		return &TypeError{Name: t.name, GoType: typeName(zero), Err: ErrNoHandler,
			Reason: fmt.Sprintf("no handlers nor appliers are given for it, and *%T does not implement aggregate.Aggregate", zero)}
	}
	return nil
}

// canHandle is [busrepo.CanHandle]: whether the type can decide commands
// of Go type ct, with a bound handler or the [Aggregate] fallback.
func (t *Type[T, PT]) canHandle(ct reflect.Type) bool {
	_, ok := t.handlers.get(ct)
	return ok || t.fallback
}

// Handle lets state decide cmd: with the handler bound to cmd's Go type,
// or else with state's own Handle when *T implements [Aggregate]. A command
// it has no handler for is a [*TypeError] matching [ErrNoHandler]; a panic
// is recovered into a [*PanicError]. The handler's own error is returned
// unchanged. Most code lets the command bus call it; a test may too.
func (t *Type[T, PT]) Handle(ctx context.Context, state PT, cmd any) ([]any, error) {
	return t.handle(ctx, "", state, cmd)
}

// Apply evolves state by event: with the applier bound to event's Go type,
// or else with state's own Apply when *T implements [Aggregate]. An event
// it has no applier for is an [*UnknownEventError]; a panic is recovered
// into a [*PanicError].
func (t *Type[T, PT]) Apply(state PT, event any) error {
	return t.apply("", state, event)
}

// handle is Handle for the instance whose stream is stream.
func (t *Type[T, PT]) handle(ctx context.Context, stream string, state PT, cmd any) (events []any, err error) {
	h, _ := t.handlers.get(reflect.TypeOf(cmd))
	defer func() {
		if v := recover(); v != nil {
			method := "Handle"
			if h != nil {
				method = fmt.Sprintf("%T", cmd)
			}
			events, err = nil, &PanicError{Stream: stream, Method: method, Value: v, Stack: debug.Stack()}
		}
	}()
	if h != nil {
		return h((*T)(state), ctx, cmd)
	}
	if t.fallback {
		return any(state).(Aggregate).Handle(ctx, cmd)
	}
	return nil, &TypeError{Name: t.name, GoType: typeName(cmd), Err: ErrNoHandler,
		Reason: fmt.Sprintf("no handler for command type %T, and %T does not implement aggregate.Aggregate", cmd, state)}
}

// apply is Apply for the instance whose stream is stream.
func (t *Type[T, PT]) apply(stream string, state PT, event any) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Stream: stream, Method: "Apply", Value: v, Stack: debug.Stack()}
		}
	}()
	et := reflect.TypeOf(event)
	if a, ok := t.appliers.get(et); ok {
		a((*T)(state), event)
		return nil
	}
	if et != nil && et.Kind() == reflect.Pointer {
		// A *E is applied as the E the codec would store, as Save's check
		// and aggregatetest take it. Rare: the store hands back values.
		if a, ok := t.appliers.get(et.Elem()); ok {
			if v := reflect.ValueOf(event); !v.IsNil() {
				a((*T)(state), v.Elem().Interface())
				return nil
			}
		}
	}
	if t.fallback {
		return any(state).(Aggregate).Apply(event)
	}
	return &UnknownEventError{Aggregate: t.name, Stream: stream, GoType: typeName(event)}
}

// checkEvents refuses, before anything is appended, a decided event that
// the type has no applier for: stored, it would make the stream unloadable.
// With the [Aggregate] fallback the type cannot tell, and Apply will judge.
// A *E is checked as E, since the codec stores it as one.
func (t *Type[T, PT]) checkEvents(stream string, events []any) error {
	if t.fallback {
		return nil
	}
	for _, e := range events {
		et := reflect.TypeOf(e)
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if _, ok := t.appliers.get(et); !ok {
			return &UnknownEventError{Aggregate: t.name, Stream: stream, GoType: et.String()}
		}
	}
	return nil
}

// byType finds the function bound to a Go type. An aggregate has a
// handful of command and event types, and comparing a few reflect.Types
// avoids hashing one, so it scans a slice, and uses a map only past
// maxScanned types. It is written only while its Type is made, so reads
// need no lock.
type byType[F any] struct {
	types []reflect.Type
	fns   []F
	index map[reflect.Type]int
}

// maxScanned is how many types byType scans before it uses a map.
const maxScanned = 8

// add binds f to t, and reports false when t is already bound.
func (b *byType[F]) add(t reflect.Type, f F) bool {
	if _, dup := b.get(t); dup {
		return false
	}
	b.types, b.fns = append(b.types, t), append(b.fns, f)
	if len(b.types) > maxScanned {
		if b.index == nil {
			b.index = make(map[reflect.Type]int, len(b.types))
			for i, t := range b.types[:len(b.types)-1] {
				b.index[t] = i
			}
		}
		b.index[t] = len(b.types) - 1
	}
	return true
}

// get returns the function bound to t.
func (b *byType[F]) get(t reflect.Type) (F, bool) {
	if b.index != nil {
		if i, ok := b.index[t]; ok {
			return b.fns[i], true
		}
	} else {
		for i, bt := range b.types {
			if bt == t {
				return b.fns[i], true
			}
		}
	}
	var zero F
	return zero, false
}

// all returns the bound types.
func (b *byType[F]) all() []reflect.Type { return b.types }
