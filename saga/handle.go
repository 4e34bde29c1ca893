package saga

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"
)

// RejectedError is the reason a rejected command's handler receives: the
// text of the error its aggregate returned, as recorded when the command
// was rejected (the error's Go type does not survive the record).
type RejectedError struct {
	// Command is the rejected command's ID.
	Command string
	// Reason is the aggregate's error text.
	Reason string
}

// Error returns the aggregate's error text, as the rejection handler would
// report it to a person.
func (e *RejectedError) Error() string { return e.Reason }

// PanicError is a handler's panic, turned into an error of its message.
type PanicError struct {
	Value any
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// run calls the handler on a fresh copy of the instance's state and turns
// what it decided into r: the new state, the commands with their IDs, and
// the deadlines. A handler error or panic is herr, and nothing is stored.
func (e *engine[S]) run(ctx context.Context, in *instance[S], r *record, msg *message, now time.Time,
	handler func(s *S, o *Output) error) (*record, outcome, error) {
	s, err := e.state(in)
	if err != nil {
		return nil, 0, err
	}
	out := &Output{now: now}
	if err := guard(func() error { return handler(s, out) }); err != nil {
		return nil, 0, err
	}
	if len(out.commands) > maxCommandsPerStep {
		return nil, 0, fmt.Errorf("the step sends %d commands, more than the limit of %d", len(out.commands), maxCommandsPerStep)
	}
	for i, cmd := range out.commands {
		if cmd == nil || !e.t.sends[typeOf(cmd)] {
			return nil, 0, fmt.Errorf("command %d of the step, %T, is not declared with saga.Sends", i, cmd)
		}
		raw, err := e.t.reg.EncodeValue(cmd)
		if err != nil {
			return nil, 0, fmt.Errorf("command %d of the step: %w", i, err)
		}
		r.Commands = append(r.Commands, sentCommand{ID: commandID(in.stream, msg.key(), i), Command: toRaw(raw)})
	}
	for _, name := range out.cancels {
		r.Deadlines = slices.DeleteFunc(r.Deadlines, func(d deadline) bool { return d.Name == name })
	}
	for _, sc := range out.schedules {
		if sc.name == "" {
			return nil, 0, fmt.Errorf("a deadline without a name")
		}
		if e.t.deadlines[sc.name] == nil {
			return nil, 0, fmt.Errorf("deadline %q has no handler (saga.OnDeadline)", sc.name)
		}
		raw, err := e.t.reg.EncodeValue(sc.payload)
		if err != nil {
			return nil, 0, fmt.Errorf("the payload of deadline %q: %w", sc.name, err)
		}
		r.Deadlines = slices.DeleteFunc(r.Deadlines, func(d deadline) bool { return d.Name == sc.name })
		r.Deadlines = append(r.Deadlines, deadline{ID: deadlineID(msg.key(), sc.name), Name: sc.name, At: sc.at, Payload: toRaw(raw)})
	}
	if out.complete {
		r.Completed, r.Deadlines, r.Held = true, nil, nil
	}
	state, err := e.t.reg.EncodeValue(*s)
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the saga state: %w", err)
	}
	r.State = toRaw(state)
	return r, handled, nil
}

// guard calls fn, turning a panic into a [*PanicError].
func guard(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// typeOf returns the Go type that mappings are keyed by: the value's type,
// or the element type of a pointer.
func typeOf(v any) reflect.Type {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// counters are a saga type's running totals, for [Stats].
type counters struct {
	handled, duplicates, ignored, held, parked atomic.Int64
	// conflicts counts the step appends lost to another writer of the
	// instance (another runner), each followed by a reload.
	conflicts atomic.Int64
}

func (c *counters) count(o outcome) {
	if c == nil {
		return
	}
	switch o {
	case handled:
		c.handled.Add(1)
	case duplicate:
		c.duplicates.Add(1)
	case ignored:
		c.ignored.Add(1)
	case heldBack:
		c.held.Add(1)
	case parkedOut:
		c.parked.Add(1)
	}
}

// deref returns the value a pointer points to, so that a mapping for E
// takes a delivered *E too.
func deref(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}
