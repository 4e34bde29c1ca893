package saga

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busprobe"
)

// StreamPrefix starts the name of every saga instance stream. Aggregate
// type names cannot contain ':', so no aggregate stream starts with it.
const StreamPrefix = "saga:"

// Type is a declared saga type whose instances hold a state S. Every
// set-up error its functions return (On, OnDeadline, OnRejected, Sends) is
// kept, and [NewRunner] refuses the type with them: fix the set-up rather
// than go on without the mapping that failed. Make one
// with [New], declare what it reacts to with [On], [OnDeadline] and
// [OnRejected], and what it sends with [Sends]; then run it with a
// [Runner]. A Type must not be changed once a Runner uses it.
type Type[S any] struct {
	name     string
	reg      *codec.Registry
	newState func(id string) *S

	mu        sync.Mutex
	frozen    bool
	events    map[reflect.Type]*eventMapping[S]
	deadlines map[string]*deadlineMapping[S]
	rejected  map[reflect.Type]*rejectionMapping[S]
	sends     map[reflect.Type]bool
	// stored are the stored type names of the mapped events, older names
	// included, once the set-up ends.
	stored map[string]bool
	// lineage maps the codec name of each command type the saga sends to
	// the name its command IDs derive from (see lineageName).
	lineage map[string]string
	// failed are the set-up errors that On, OnDeadline, OnRejected and
	// Sends returned: a runner refuses the type, so that a set-up error
	// nobody checked cannot leave a saga that parks every message.
	failed []error
}

// keep records err, a set-up error about to be returned, among those that
// make a runner refuse the type. t.mu is held.
func (t *Type[S]) keep(err *SetupError) error {
	t.failed = append(t.failed, err)
	return err
}

// Options configure a saga [Type]. The zero value is the default.
type Options[S any] struct {
	// New returns the state of a new instance; nil means a zero S.
	New func(id string) *S
}

// New declares the saga type called name, whose instances live in streams
// "saga:<name>-<instance ID>". The name follows the rules of an aggregate
// type's name (no "-"). S is the instance state: it must be registered with
// reg under a name and schema version of its own, so that the state
// recorded by older code is upcast like an event.
func New[S any](name string, reg *codec.Registry, opts Options[S]) (*Type[S], error) {
	bad := func(reason string) error { return &SetupError{Saga: name, Reason: reason} }
	switch {
	case name == "":
		return nil, bad("the saga type name is empty")
	case strings.Contains(name, "-"):
		return nil, bad(`the saga type name contains "-", which separates it from the instance ID in stream names`)
	case reg == nil:
		return nil, bad("no codec registry")
	}
	if err := storekit.ValidateStream(StreamPrefix + name + "-x"); err != nil {
		return nil, bad(fmt.Sprintf("the saga type name does not make valid stream names: %v", err))
	}
	if _, _, ok := codec.NameOf[S](reg); !ok {
		var zero S
		return nil, bad(fmt.Sprintf("its state type %T is not registered with the codec; register it with a name and schema version", zero))
	}
	return &Type[S]{
		name: name, reg: reg, newState: opts.New,
		events:    make(map[reflect.Type]*eventMapping[S]),
		deadlines: make(map[string]*deadlineMapping[S]),
		rejected:  make(map[reflect.Type]*rejectionMapping[S]),
		sends:     make(map[reflect.Type]bool),
	}, nil
}

// Name returns the saga type's name.
func (t *Type[S]) Name() string { return t.name }

// Stream returns the name of the stream of instance id.
func (t *Type[S]) Stream(id string) string { return StreamPrefix + t.name + "-" + id }

// Category returns the stream prefix of this type's instances.
func (t *Type[S]) Category() string { return StreamPrefix + t.name + "-" }

// Origin is where an event came from, as [Event.InstanceFrom] sees it.
type Origin struct {
	// Source is a stored event's stream, or a delivery's source, and
	// Sequence its version in the stream, or the delivery's sequence.
	Source   string
	Sequence uint64
	// Metadata is the event's metadata.
	Metadata eventstore.Metadata
	// Stored says the event was read from the store (by Run, CatchUp or
	// HandleStored) rather than delivered.
	Stored bool
}

// Event maps event type E to a saga: how to find the instance an event is
// for, whether it may start one, and what the instance does with it.
type Event[S, E any] struct {
	// Instance returns the ID of the instance that e is for, from the
	// event and its metadata. An empty ID is an error of that event,
	// parked like a failing handler, never a panic. The outbox sends each
	// command with the correlation ID of the message its step handled, and
	// the bus copies it into the command's events, so md.CorrelationID
	// finds the instance of an event that does not carry its ID when the
	// flow's first command was sent with that ID as its correlation ID.
	Instance func(e E, md eventstore.Metadata) string
	// InstanceFrom is Instance for a mapping that needs to know where the
	// event came from: the stream of a stored event names the aggregate
	// that recorded it (aggregate.Type.ID turns it back into the ID), a
	// delivery's source its partition or topic. Set Instance or
	// InstanceFrom, not both.
	InstanceFrom func(e E, from Origin) string
	// Starts lets the event start an instance that does not exist yet;
	// without it such an event is ignored (and counted).
	Starts bool
	// AnyOrder handles a delivered event when it arrives, even when
	// messages of its source that come before it are still missing (see
	// [Delivery]). Duplicates are still dropped: the instance keeps the
	// sequences it handled above its source's watermark (at most 256 per
	// source; beyond them the event waits for the gap below to fill), and
	// the messages below it are taken in their turn. Stored events come in
	// their stream's order anyway.
	AnyOrder bool
	// Handle decides what the instance does: it may change the state and
	// say, through out, which commands to send, which deadlines to set or
	// cancel, and whether the instance is complete. An error is retried,
	// then parks the event for this instance only.
	Handle func(ctx context.Context, s *S, e E, out *Output) error
}

type eventMapping[S any] struct {
	goType   reflect.Type
	name     string // the registered type name
	starts   bool
	anyOrder bool
	instance func(v any, from Origin) string
	handle   func(ctx context.Context, s *S, v any, out *Output) error
}

// On maps event type E, which must be registered with the saga's codec
// registry. Mapping a type twice, or a mapping without Instance or Handle,
// is a [*SetupError].
func On[S, E any](t *Type[S], m Event[S, E]) error {
	et := reflect.TypeFor[E]()
	name, _, ok := codec.NameOf[E](t.reg)
	t.mu.Lock()
	defer t.mu.Unlock()
	bad := func(reason string) error {
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("event %s: %s", et, reason)})
	}
	switch {
	case t.frozen:
		return &SetupError{Saga: t.name, Reason: fmt.Sprintf("event %s: the saga type is already in use by a runner", et)}
	case !ok:
		return bad("is not registered with the codec")
	case m.Instance == nil && m.InstanceFrom == nil:
		return bad("the mapping has no Instance function")
	case m.Instance != nil && m.InstanceFrom != nil:
		return bad("the mapping sets both Instance and InstanceFrom: set one")
	case m.Handle == nil:
		return bad("the mapping has no Handle function")
	case t.events[et] != nil:
		return bad("is mapped twice")
	}
	t.events[et] = &eventMapping[S]{
		goType: et, name: name, starts: m.Starts, anyOrder: m.AnyOrder,
		instance: func(v any, from Origin) string {
			if m.InstanceFrom != nil {
				return m.InstanceFrom(v.(E), from)
			}
			return m.Instance(v.(E), from.Metadata)
		},
		handle: func(ctx context.Context, s *S, v any, out *Output) error { return m.Handle(ctx, s, v.(E), out) },
	}
	return nil
}

type deadlineMapping[S any] struct {
	payload reflect.Type
	handle  func(ctx context.Context, s *S, payload any, out *Output) error
}

// OnDeadline handles the deadline called name when it fires, with its
// payload of type P (registered with the codec). A deadline fires at most
// once, as a step of its instance, and never after it was cancelled or
// rescheduled.
func OnDeadline[S, P any](t *Type[S], name string, h func(ctx context.Context, s *S, payload P, out *Output) error) error {
	pt := reflect.TypeFor[P]()
	_, _, ok := codec.NameOf[P](t.reg)
	t.mu.Lock()
	defer t.mu.Unlock()
	bad := func(reason string) error {
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("deadline %q: %s", name, reason)})
	}
	switch {
	case t.frozen:
		return &SetupError{Saga: t.name, Reason: fmt.Sprintf("deadline %q: the saga type is already in use by a runner", name)}
	case name == "":
		return bad("the deadline name is empty")
	case !ok:
		return bad(fmt.Sprintf("its payload type %s is not registered with the codec", pt))
	case h == nil:
		return bad("the handler is nil")
	case t.deadlines[name] != nil:
		return bad("is handled twice")
	}
	t.deadlines[name] = &deadlineMapping[S]{payload: pt, handle: func(ctx context.Context, s *S, p any, out *Output) error {
		return h(ctx, s, p.(P), out)
	}}
	return nil
}

type rejectionMapping[S any] struct {
	handle func(ctx context.Context, s *S, cmd any, reason error, out *Output) error
}

// OnRejected handles the rejection of a command of type C that the saga
// sent: its aggregate refused it (Handle returned an error). This is where
// compensation starts. The rejection reaches the instance exactly once, as
// a step; reason carries the aggregate's error text. C is declared as sent
// (see [Sends]).
func OnRejected[S any, C command.Command](t *Type[S], h func(ctx context.Context, s *S, cmd C, reason error, out *Output) error) error {
	ct := reflect.TypeFor[C]()
	if err := Sends[S, C](t); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case h == nil:
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("rejections of %s: the handler is nil", ct)})
	case t.rejected[ct] != nil:
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("rejections of %s are handled twice", ct)})
	}
	t.rejected[ct] = &rejectionMapping[S]{handle: func(ctx context.Context, s *S, cmd any, reason error, out *Output) error {
		return h(ctx, s, cmd.(C), reason, out)
	}}
	return nil
}

// Sends declares that the saga sends commands of type C. C must be
// registered with the codec (commands are recorded in the instance's
// stream before they are sent), and a [Runner] checks that its bus routes
// C. Sending an undeclared command type fails the step.
func Sends[S any, C command.Command](t *Type[S]) error {
	ct := reflect.TypeFor[C]()
	_, _, ok := codec.NameOf[C](t.reg)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.frozen:
		return &SetupError{Saga: t.name, Reason: fmt.Sprintf("command %s: the saga type is already in use by a runner", ct)}
	case ct.Kind() == reflect.Interface:
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("command %s is an interface type; declare concrete command types", ct)})
	case !ok:
		return t.keep(&SetupError{Saga: t.name, Reason: fmt.Sprintf("command %s is not registered with the codec", ct)})
	}
	t.sends[ct] = true
	return nil
}

// freeze ends the set-up, so that a runner reads the mappings without
// locks, and checks what can only be checked against a bus.
func (t *Type[S]) freeze(bus *command.Bus) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.failed) > 0 {
		return &SetupError{Saga: t.name, Reason: "its set-up failed (an error of On, OnDeadline, OnRejected or Sends)", Err: errors.Join(t.failed...)}
	}
	if len(t.events) == 0 {
		return &SetupError{Saga: t.name, Reason: "it maps no event type"}
	}
	if bus != nil {
		for ct := range t.sends {
			if !busprobe.Routes(bus, ct) {
				return &SetupError{Saga: t.name, Reason: fmt.Sprintf("it sends %s, which the command bus does not route", ct)}
			}
		}
	}
	if err := t.reg.Validate(); err != nil {
		return &SetupError{Saga: t.name, Reason: "its codec registry is not set up right", Err: err}
	}
	if !t.frozen {
		t.stored = make(map[string]bool)
		for _, name := range t.eventTypes() {
			t.stored[name] = true
		}
		t.lineage = make(map[string]string)
		for ct := range t.sends {
			if name, _, ok := t.reg.NameOfType(ct); ok {
				t.lineage[name] = lineageName(t.reg, name)
			}
		}
	}
	t.frozen = true
	return nil
}

// lineageName returns the name a command type's IDs derive from: the
// oldest name that upcasters rename into its codec name, so that a rename
// of the type does not change the IDs of the commands that a Redrive
// decides again; the codec name when it has no single oldest name.
func lineageName(reg *codec.Registry, name string) string {
	root := ""
	for _, older := range reg.SourceTypes(name) {
		if src := reg.SourceTypes(older); len(src) == 1 && src[0] == older {
			if root != "" {
				return name // several lineages merge into it
			}
			root = older
		}
	}
	if root == "" {
		return name
	}
	return root
}

// commandName returns the name the IDs of commands of codec type name
// derive from.
func (t *Type[S]) commandName(name string) string {
	if stable, ok := t.lineage[name]; ok {
		return stable
	}
	return name
}

// storedTypes returns the stored type names of the events the saga maps.
func (t *Type[S]) storedTypes() map[string]bool { return t.stored }

// eventTypes returns the stored type names the saga reacts to, including
// the older names that upcasters turn into them.
func (t *Type[S]) eventTypes() []string {
	names := make([]string, 0, len(t.events))
	for _, m := range t.events {
		names = append(names, m.name)
	}
	return t.reg.SourceTypes(names...)
}

// state returns the state of a new instance.
func (t *Type[S]) initial(id string) *S {
	if t.newState != nil {
		if s := t.newState(id); s != nil {
			return s
		}
	}
	return new(S)
}
