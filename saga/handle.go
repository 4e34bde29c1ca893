package saga

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-es/cairn/command"
)

// RejectedError is the reason a rejected command's handler receives: the
// text of the error its aggregate returned, as recorded when the command
// was rejected. The error's Go value does not survive the record; its code
// does, when the codec registered one for it (codec.RegisterError), and
// errors.Is then matches the registered error, through Unwrap, on every
// read, after restarts and in other processes.
type RejectedError struct {
	// Command is the rejected command's ID.
	Command string
	// Reason is the aggregate's error text, and Code its error's code (""
	// for none).
	Reason, Code string
	// registered is the error the saga's codec registered under Code.
	registered error
}

// Unwrap returns the error the saga's codec registered under Code; nil
// for none.
func (e *RejectedError) Unwrap() error { return e.registered }

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
// what it decided into the step's record: the new state, the commands with
// their IDs, and the deadlines. A handler error or panic, or a decision
// that cannot be stored, is herr, and nothing is stored.
func (e *engine[S]) run(ctx context.Context, in *instance[S], d *decision, msg *message,
	handler func(s *S, o *Output) error) (*record, outcome, error, error) {
	r := &d.r
	s, err := e.state(in)
	if err != nil {
		return nil, 0, err, nil
	}
	out := &Output{now: d.now}
	if err := guard(func() error { return handler(s, out) }); err != nil {
		return nil, 0, err, nil
	}
	if err := e.commands(in, r, msg.key(), out.commands); err != nil {
		return nil, 0, err, nil
	}
	switch {
	case r.Completed && len(out.timing) > 0:
		// A rejection's handler on a completed instance: it takes no
		// deadlines, which would fire on an instance that has ended.
		e.log.WarnContext(ctx, "saga: a step of a completed instance set or cancelled deadlines; they are dropped",
			slog.String("saga", e.t.name), slog.String("instance", in.id), slog.String("message", msg.String()))
	default:
		if err := e.timings(in, r, msg.key(), out.timing); err != nil {
			return nil, 0, err, nil
		}
	}
	if out.complete && !r.Completed {
		complete(r, d.version)
	}
	state, err := e.t.reg.EncodeValue(*s)
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the saga state: %w", err), nil
	}
	r.State = toRaw(state)
	return r, handled, nil, nil
}

// commands records the commands a step sends, each with the ID that its
// meaning gives it (see commandID). A command of an undeclared type, one
// that does not encode, or one without a target aggregate fails the step:
// the bus could never carry it out.
func (e *engine[S]) commands(in *instance[S], r *record, key string, cmds []command.Command) error {
	ordinals := make(map[[2]string]int, len(cmds))
	for i, cmd := range cmds {
		if cmd == nil || !e.t.sends[typeOf(cmd)] {
			if _, _, registered := e.t.reg.NameOfType(typeOf(cmd)); cmd != nil && !registered {
				return fmt.Errorf("command %d of the step, %T, is not registered with the codec, nor declared with saga.Sends", i, cmd)
			}
			return fmt.Errorf("command %d of the step, %T, is not declared with saga.Sends", i, cmd)
		}
		raw, err := e.t.reg.EncodeValue(cmd)
		if err != nil {
			return fmt.Errorf("command %d of the step: %w", i, err)
		}
		var target string
		if err := guard(func() error { target = cmd.AggregateID(); return nil }); err != nil {
			return fmt.Errorf("command %d of the step, %T: AggregateID: %w", i, cmd, err)
		}
		if target == "" {
			return fmt.Errorf("command %d of the step, %T, names no aggregate (its AggregateID is empty)", i, cmd)
		}
		k := [2]string{e.t.commandName(raw.Type), target}
		n := ordinals[k]
		ordinals[k] = n + 1
		r.Commands = append(r.Commands, sentCommand{ID: commandID(in.stream, key, k[0], target, n), Command: toRaw(raw)})
	}
	return nil
}

// timings applies a step's deadline operations to its record, in the order
// the handler called them. A schedule without a handler, at a time no
// deadline can have, or with a payload that does not encode fails the step.
func (e *engine[S]) timings(in *instance[S], r *record, key string, ops []timing) error {
	for _, op := range ops {
		r.Deadlines = slices.DeleteFunc(r.Deadlines, func(d deadline) bool { return d.Name == op.name })
		if op.cancel {
			continue
		}
		switch {
		case op.name == "":
			return fmt.Errorf("a deadline without a name")
		case e.t.deadlines[op.name] == nil:
			return fmt.Errorf("deadline %q has no handler (saga.OnDeadline)", op.name)
		case op.at.IsZero():
			return fmt.Errorf("deadline %q is scheduled at the zero time (a time field left empty?)", op.name)
		case op.at.Year() < 1970 || op.at.Year() > 9999:
			return fmt.Errorf("deadline %q is scheduled at %s, outside the years 1970 to 9999", op.name, op.at.Format(time.RFC3339))
		}
		raw, err := e.t.reg.EncodeValue(op.payload)
		if err != nil {
			return fmt.Errorf("the payload of deadline %q: %w", op.name, err)
		}
		r.Deadlines = append(r.Deadlines, deadline{ID: deadlineID(in.stream, key, op.name), Name: op.name, At: op.at, Payload: toRaw(raw)})
	}
	return nil
}

// complete ends the instance in r, at the step of version: its deadlines
// are dropped, and so are the events waiting for it, which it would
// ignore; the outcomes of the commands that step sends still reach it.
func complete(r *record, version uint64) {
	r.Completed, r.CompletedAt, r.Deadlines = true, version, nil
	r.Held = slices.DeleteFunc(r.Held, func(h envelope) bool { return h.kind() == kindEvent })
	for src, p := range r.Sources {
		if p.Pending {
			p.Pending, p.HeldTo = false, 0
			r.Sources[src] = p
		}
	}
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
	// unreadable counts the records that could not be read (damaged, or
	// foreign events in an instance stream), each skipped and logged.
	unreadable atomic.Int64
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
