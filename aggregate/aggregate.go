package aggregate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/clip"
	"github.com/cairn-es/cairn/internal/names"
)

// Aggregate is what the pointer to a user's aggregate struct may implement
// to decide every command and apply every event in one method each. It is
// the fallback of a [Type]: what has no handler or applier bound by
// [Handles] or [Applies] goes to these methods. Bound handlers spare the
// type switch that they otherwise need.
type Aggregate interface {
	// Handle decides what cmd means for the aggregate in its current state
	// and returns the events that record the decision (none when there is
	// nothing to record), or an error that rejects the command. It must not
	// change the aggregate: state changes only through Apply, once the
	// events are stored.
	Handle(ctx context.Context, cmd any) ([]any, error)
	// Apply evolves the aggregate by one event, as decoded by the codec
	// (a registered T, never a *T). An event it does not know should be
	// rejected with an error wrapping [ErrUnknownEvent] rather than ignored,
	// so that a model change that forgot an event is caught, not hidden.
	Apply(event any) error
}

// Root constrains the type parameters of [Type] and [Repository]: PT is
// *T. Callers name only T; Go infers PT. *T need not implement
// [Aggregate]: a type whose commands and events all have bound handlers
// and appliers does without it.
type Root[T any] interface {
	*T
}

// Options configure an aggregate [Type]. The zero value is the default.
type Options[T any] struct {
	// New returns a new, empty aggregate with the given ID, the state before
	// its first event. Nil means new(T).
	New func(id string) *T
	// SnapshotEvery asks for a snapshot of an instance every SnapshotEvery
	// events; zero means never. T must then be registered with the codec,
	// under a type name and schema version of its own: that version is the
	// snapshot's schema version, and a stored snapshot that the codec cannot
	// bring to it is ignored.
	SnapshotEvery uint64
}

// Type is an aggregate type: a name, which is the stream category of its
// instances, how to make an empty instance, and how an instance decides
// commands and applies events. Make one with [NewType]. It is immutable,
// and safe for concurrent use.
type Type[T any, PT Root[T]] struct {
	name string
	// category is name + "-", which starts every instance's stream.
	category string
	opts     Options[T]
	// handlers and appliers are the bound functions by command and event
	// Go type; fallback reports whether *T implements Aggregate, for the
	// types that have none.
	handlers byType[func(*T, context.Context, any) ([]any, error)]
	appliers byType[func(*T, any)]
	fallback bool
}

// NewType returns the aggregate type called name, whose instances live in
// streams "<name>-<id>". The name must be a valid stream name without "-",
// so that the category prefix "<name>-" selects this type's streams and no
// other's, and without ":", so that no aggregate stream is ever named like
// one of Cairn's own (saga instances live in "saga:<type>-<id>").
//
// bindings say how instances decide commands and apply events, one Go type
// each (see [Handles] and [Applies]):
//
//	orders, err := aggregate.NewType[Order]("order", aggregate.Options[Order]{},
//		aggregate.Handles((*Order).Place),
//		aggregate.Applies((*Order).Placed),
//	)
//
// What has no binding goes to *T's Handle or Apply when *T implements
// [Aggregate]. A set-up mistake is a [*TypeError] naming the type and the
// Go type at fault: two bindings for one Go type ([ErrDuplicateHandler]),
// a nil function, an interface command type, an event type that is a
// pointer or an interface (the codec decodes events as values), or no
// bindings for a *T that does not implement Aggregate ([ErrNoHandler]).
func NewType[T any, PT Root[T]](name string, opts Options[T], bindings ...Binding[T]) (*Type[T, PT], error) {
	bad := func(reason string) error { return &TypeError{Name: name, Reason: reason} }
	switch {
	case name == "":
		return nil, bad("is empty")
	case strings.Contains(name, "-"):
		return nil, bad(`contains "-", which separates the type name from the ID in stream names`)
	case strings.Contains(name, ":"):
		return nil, bad(`contains ":", which Cairn keeps for its own streams (saga instances are "saga:<type>-<id>")`)
	}
	var invalid *eventstore.InvalidArgumentError
	if err := storekit.ValidateStream(eventstore.Category(name) + "x"); errors.As(err, &invalid) {
		// The reason only: the error's own message would quote the name again.
		return nil, bad("is not a valid stream category: the stream names it makes " + invalid.Reason)
	}
	t := &Type[T, PT]{name: name, category: name + "-", opts: opts}
	_, t.fallback = any(PT(nil)).(Aggregate)
	if err := t.bind(bindings); err != nil {
		return nil, err
	}
	return t, nil
}

// Name returns the type's name, its stream category.
func (t *Type[T, PT]) Name() string { return t.name }

// Stream returns the name of the stream of instance id.
func (t *Type[T, PT]) Stream(id string) string { return t.category + id }

// ID returns the ID of the instance whose stream is stream, and false for a
// stream of another category: what a projection needs to key a read model
// by aggregate from an event's StreamID.
func (t *Type[T, PT]) ID(stream string) (string, bool) {
	id, ok := strings.CutPrefix(stream, t.category)
	return id, ok && id != ""
}

// ValidateID checks an aggregate ID: not empty, and making with the type's
// name a valid stream name (see [storekit.ValidateStream]). A bad one is
// an [*eventstore.InvalidArgumentError] whose Field is "aggregate ID", not
// the "stream name" that the store would report, since the ID is what the
// caller chose.
func (t *Type[T, PT]) ValidateID(id string) error {
	// NewType checked that the name makes valid stream names: with a valid
	// ID appended after "-", the stream name is valid if it is not too long.
	if id != "" && len(t.name)+1+len(id) <= names.MaxStreamLen && names.Printable(id) {
		return nil
	}
	stream := t.Stream(id)
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Stream: stream, Index: -1, Field: "aggregate ID", Reason: reason}
	}
	if id == "" {
		return bad("is empty")
	}
	var invalid *eventstore.InvalidArgumentError
	if err := storekit.ValidateStream(stream); errors.As(err, &invalid) {
		return bad(fmt.Sprintf("%s makes a stream name that %s", clip.Quote(id), invalid.Reason))
	}
	return nil
}

// New returns a new, empty instance state with the given ID.
func (t *Type[T, PT]) New(id string) PT {
	if t.opts.New != nil {
		if p := t.opts.New(id); p != nil {
			return p
		}
	}
	return PT(new(T))
}
