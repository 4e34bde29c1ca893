// Package aggregatetest tests aggregates the way they are specified:
// given these past events, when this command arrives, then these events are
// decided (or this error, or nothing).
//
//	aggregatetest.For(t, counterType).
//		Given(Incremented{By: 2}).
//		When(Increment{By: 3}).
//		Then(Incremented{By: 3})
//
// Failures print what was expected and what happened, with a diff. The
// fixture also checks the aggregate's own rules: Handle must not change the
// aggregate, and Apply must accept every event Handle decides on. With
// [Fixture.WithCodec] the events also round-trip through the codec, as they
// would through a store, which catches unregistered types and fields the
// serializer drops.
package aggregatetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/check"
)

// Fixture is a Given/When/Then test of one aggregate type. Make it with
// [For].
type Fixture[T any, PT aggregate.Root[T]] struct {
	t     testing.TB
	typ   *aggregate.Type[T, PT]
	id    string
	reg   *codec.Registry
	given []any
}

// For starts a test of aggregate type typ, reporting failures to t. A nil
// typ (a NewType whose error was ignored) is a fatal failure of t.
func For[T any, PT aggregate.Root[T]](t testing.TB, typ *aggregate.Type[T, PT]) *Fixture[T, PT] {
	t.Helper()
	if typ == nil {
		t.Fatalf("aggregatetest: For: the aggregate type is nil (did aggregate.NewType fail?)")
	}
	return &Fixture[T, PT]{t: t, typ: typ, id: "test"}
}

// WithID sets the aggregate's ID, given to the type's constructor; the
// default is "test". An ID that the command bus would refuse (empty, or
// making no valid stream name: see [aggregate.Type.ValidateID]) is a fatal
// failure of the test, since no dispatch could reach such an aggregate.
func (f *Fixture[T, PT]) WithID(id string) *Fixture[T, PT] {
	f.t.Helper()
	if f.typ != nil {
		if err := f.typ.ValidateID(id); err != nil {
			f.t.Fatalf("aggregatetest: WithID: %v", err)
		}
	}
	f.id = id
	return f
}

// WithCodec round-trips the given and decided events through reg, as a
// store would, before they are applied and compared.
func (f *Fixture[T, PT]) WithCodec(reg *codec.Registry) *Fixture[T, PT] {
	f.reg = reg
	return f
}

// Given sets the events that happened before, in order.
func (f *Fixture[T, PT]) Given(events ...any) *Fixture[T, PT] {
	f.given = append(f.given, events...)
	return f
}

// When builds the aggregate from the given events and lets it handle cmd.
func (f *Fixture[T, PT]) When(cmd any) *Outcome[T, PT] {
	f.t.Helper()
	if f.typ == nil { // For has failed the test, with a TB that goes on
		return &Outcome[T, PT]{t: f.t, f: f, cmd: cmd, broken: true}
	}
	o := &Outcome[T, PT]{t: f.t, f: f, cmd: cmd, state: f.typ.New(f.id)}
	given, err := f.roundTrip(f.given)
	if err != nil {
		f.t.Errorf("aggregatetest: given events: %v", err)
		o.broken = true
		return o
	}
	for i, e := range given {
		if err := f.apply(o.state, e); err != nil {
			f.t.Errorf("aggregatetest: given event %d (%T) cannot be applied: %v", i, e, err)
			o.broken = true
			return o
		}
	}
	before := *o.state
	o.events, o.err = f.handle(o.state, cmd)
	if !reflect.DeepEqual(before, *o.state) {
		f.t.Errorf("aggregatetest: Handle(%T) changed the aggregate; it must decide, not mutate (state changes belong in Apply)\n%s",
			cmd, diff(before, *o.state))
	}
	if o.err == nil {
		o.events, err = f.roundTrip(o.events)
		if err != nil {
			f.t.Errorf("aggregatetest: events decided for %T: %v", cmd, err)
			o.broken = true
		}
	}
	return o
}

// Outcome is what an aggregate decided; its Then methods check it.
type Outcome[T any, PT aggregate.Root[T]] struct {
	t      testing.TB
	f      *Fixture[T, PT]
	cmd    any
	state  PT
	events []any
	err    error
	broken bool
}

// Then checks that the command was accepted with exactly these events, in
// order, and that Apply accepts them. A *E and an E are the same event.
func (o *Outcome[T, PT]) Then(events ...any) {
	o.t.Helper()
	if o.broken {
		return
	}
	if o.err != nil {
		o.t.Errorf("aggregatetest: When(%#v): want events %s, got error: %v", o.cmd, describe(events), o.err)
		return
	}
	want, got := normalize(events), normalize(o.events)
	if !reflect.DeepEqual(want, got) {
		o.t.Errorf("aggregatetest: When(%#v): wrong events\nwant: %s\ngot:  %s\n%s", o.cmd, describe(want), describe(got), diff(want, got))
		return
	}
	for i, e := range o.events {
		if err := o.f.apply(o.state, e); err != nil {
			o.t.Errorf("aggregatetest: event %d (%T) that Handle decided cannot be applied: %v", i, e, err)
			return
		}
	}
}

// ThenError checks that the command was rejected with an error matching
// target (errors.Is) and decided no events.
func (o *Outcome[T, PT]) ThenError(target error) {
	o.t.Helper()
	if o.broken {
		return
	}
	switch {
	case o.err == nil:
		o.t.Errorf("aggregatetest: When(%#v): want error %v, got events %s", o.cmd, target, describe(o.events))
	case !errors.Is(o.err, target):
		o.t.Errorf("aggregatetest: When(%#v): want error matching %v, got: %v", o.cmd, target, o.err)
	case len(o.events) > 0:
		o.t.Errorf("aggregatetest: When(%#v): a rejection must decide no events, got %s", o.cmd, describe(o.events))
	}
}

// ThenNothing checks that the command was accepted and decided no events.
func (o *Outcome[T, PT]) ThenNothing() {
	o.t.Helper()
	if o.broken {
		return
	}
	switch {
	case o.err != nil:
		o.t.Errorf("aggregatetest: When(%#v): want no events, got error: %v", o.cmd, o.err)
	case len(o.events) > 0:
		o.t.Errorf("aggregatetest: When(%#v): want no events, got %s", o.cmd, describe(normalize(o.events)))
	}
}

// State returns the aggregate after the given events and, once Then has
// passed, the decided ones: for assertions on state the events imply.
func (o *Outcome[T, PT]) State() PT { return o.state }

// roundTrip encodes and decodes events through the fixture's codec, if any.
func (f *Fixture[T, PT]) roundTrip(events []any) ([]any, error) {
	if f.reg == nil || len(events) == 0 {
		return normalize(events), nil
	}
	data, err := f.reg.EncodeAll(events...)
	if err != nil {
		return nil, err
	}
	var out []any
	for i, d := range data {
		decoded, err := f.reg.Decode(eventstore.Event{EventData: d, StreamID: f.typ.Stream(f.id), Version: uint64(i)})
		if err != nil {
			return nil, err
		}
		for _, v := range decoded {
			out = append(out, v.Value)
		}
	}
	return out, nil
}

// handle and apply go through the type, as the repository does, so that
// bound handlers and the Handle/Apply fallback are tested alike; a panic
// is reported with its stack, which a failing test wants to see.
func (f *Fixture[T, PT]) handle(state PT, cmd any) ([]any, error) {
	events, err := f.typ.Handle(context.Background(), state, cmd)
	return events, withStack(err)
}

func (f *Fixture[T, PT]) apply(state PT, event any) error {
	return withStack(f.typ.Apply(state, event))
}

func withStack(err error) error {
	var p *aggregate.PanicError
	if errors.As(err, &p) {
		return fmt.Errorf("aggregate %s panicked: %v\n%s", p.Method, p.Value, p.Stack)
	}
	return err
}

// normalize dereferences pointers to events, as the codec does: a decision
// may return *E, and Apply is given E, as after a store.
func normalize(events []any) []any {
	out := make([]any, len(events))
	for i, e := range events {
		if v := reflect.ValueOf(e); v.Kind() == reflect.Pointer && !v.IsNil() {
			e = v.Elem().Interface()
		}
		out[i] = e
	}
	return out
}

func describe(events []any) string {
	if len(events) == 0 {
		return "(none)"
	}
	s := ""
	for i, e := range events {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%#v", e)
	}
	return s
}

// diff renders where two values differ.
func diff(want, got any) string { return check.Diff(got, want) }
