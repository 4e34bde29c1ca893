package codec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/upcast"
)

// Options configure a [Registry]. The zero value is the default.
type Options struct {
	// Serializer encodes and decodes every registered type; nil means
	// [JSON].
	Serializer Serializer
}

// Registry maps Go event types to stable type names and schema versions,
// encodes values, and decodes stored events, upcasting old ones, into the
// Go values the current code expects.
//
// Set it up once: [Register] every type, add upcasters with
// [Registry.Upcast], then call [Registry.Validate]. The first Encode or
// Decode validates it if Validate was not called, and from then on the
// registry is frozen: later registrations fail with [ErrFrozen]. A registry
// whose set-up is invalid refuses every Encode and Decode with the set-up
// error ([ErrInvalidSetup]) rather than decode wrongly. After set-up, every
// method is safe for concurrent use.
type Registry struct {
	ser Serializer

	mu        sync.Mutex // serializes set-up
	frozen    atomic.Bool
	setupErrs []error
	setupErr  error // set before frozen is, never changed after

	// Read without locking once frozen: nothing writes them after.
	byName map[string]*entry
	byType map[reflect.Type]*entry
	chain  upcast.Chain
	// errs are the registered domain errors (see RegisterError), in the
	// order of registration.
	errs []registeredError
}

// entry is one registered type: its name, its current version, and the
// closures that encode and decode it without reflection on the hot path.
type entry struct {
	name    string
	version uint32
	goType  reflect.Type
	// decode unmarshals data into a new T and returns the T (not a pointer).
	decode func(data []byte) (any, error)
	// encode marshals a T or a non-nil *T.
	encode func(v any) ([]byte, error)
	// exact reports that a T comes back from the serializer as it went
	// in, provided that strings, when not nil, accepts it (see
	// [Registry.RoundTrip]).
	exact   bool
	strings func(reflect.Value) bool
}

// NewRegistry returns an empty registry.
func NewRegistry(opts Options) *Registry {
	ser := opts.Serializer
	if ser == nil {
		ser = JSON{}
	}
	return &Registry{
		ser:    ser,
		byName: make(map[string]*entry),
		byType: make(map[reflect.Type]*entry),
	}
}

// Register maps the Go type T to the type name and its current schema
// version. Names are explicit and must stay stable, whatever the Go type
// is called or where it lives; versions start at 1 (older data may still
// be stored at version 0 and upcast from there). Decoding yields T values,
// not pointers, so consumers switch on `case OrderPlaced:`. Encode accepts
// both a T and a *T.
//
// It returns a [*RegistrationError] for an empty or malformed name (see
// storekit.ValidateType), a name with the [ReservedPrefix], a version of 0, an interface, pointer, channel,
// function or unsafe pointer type (a pointer would make Encode of a *T
// ambiguous, and decoding yields values), a name or a Go type already
// registered;
// the problem is also kept, and [Registry.Validate] reports it again, so a
// set-up that ignored the error cannot be used. After the registry is
// frozen it returns [ErrFrozen].
func Register[T any](r *Registry, name string, version uint32) error {
	goType := reflect.TypeFor[T]()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen.Load() {
		return fmt.Errorf("register %s as %q v%d: %w", goType, name, version, ErrFrozen)
	}
	fail := func(reason string) error {
		err := &RegistrationError{Name: name, Version: version, GoType: goType.String(), Reason: reason}
		r.setupErrs = append(r.setupErrs, err)
		return err
	}
	if reason := checkName(name); reason != "" {
		return fail(reason)
	}
	switch goType.Kind() {
	case reflect.Interface:
		return fail("is an interface type: register the concrete types")
	case reflect.Pointer:
		return fail("is a pointer type: register the type it points to (" + goType.Elem().String() + "), and Encode takes pointers to it too")
	case reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return fail("is a " + goType.Kind().String() + " type, which no serializer can store")
	}
	if version == 0 {
		return fail("version 0 is reserved for data written before versioning: registered versions start at 1")
	}
	if old, ok := r.byName[name]; ok {
		return fail(fmt.Sprintf("the name is already registered for %s", old.goType))
	}
	if old, ok := r.byType[goType]; ok {
		return fail(fmt.Sprintf("the Go type is already registered as %q v%d", old.name, old.version))
	}
	ser := r.ser
	unmarshal := ser.Unmarshal
	var exact bool
	var checkStrings func(reflect.Value) bool
	var plain *plainCodec
	switch ser.(type) {
	case JSON, *JSON:
		exact, checkStrings = exactJSON(goType)
		// Which decoder the type takes is decided now, not at every decode.
		unmarshal = jsonDecodingOf(reflect.PointerTo(goType)).fresh // decode's v is new
		if p, ok := ser.(*JSON); !ok || p != nil {
			// A nil *JSON's Marshal panics, which every Encode reports as
			// an error: writing plain values for it would make the
			// outcome hang on the value. (It decodes as JSON does.)
			plain = plainCodecOf(goType)
		}
	}
	e := &entry{
		name:    name,
		version: version,
		goType:  goType,
		decode: func(data []byte) (any, error) {
			if plain != nil {
				var v T // on the stack: plain keeps no pointer to it
				if plain.decode(data, unsafe.Pointer(&v)) {
					return v, nil
				}
			}
			return decodeNew[T](unmarshal, data)
		},
		encode: func(v any) ([]byte, error) {
			switch x := v.(type) {
			case T:
				return encodePlainFirst(plain, ser, &x)
			case *T:
				if x == nil {
					return nil, ErrNilValue
				}
				return encodePlainFirst(plain, ser, x)
			}
			return nil, fmt.Errorf("%T is not %s", v, goType) // unreachable: looked up by type
		},
		exact:   exact,
		strings: checkStrings,
	}
	r.byName[name] = e
	r.byType[goType] = e
	return nil
}

// decodeNew decodes data into a new T with unmarshal.
func decodeNew[T any](unmarshal func([]byte, any) error, data []byte) (any, error) {
	var v T
	if err := unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// encodePlainFirst encodes *p with T's plain codec, when T has one and it
// takes the value, else with ser.
func encodePlainFirst[T any](plain *plainCodec, ser Serializer, p *T) ([]byte, error) {
	if plain != nil {
		if data, ok := plain.encode(unsafe.Pointer(p)); ok {
			return data, nil
		}
	}
	return ser.Marshal(*p)
}

func checkName(name string) string {
	var bad *eventstore.InvalidArgumentError
	if errors.As(storekit.ValidateType(name), &bad) {
		return "the type name " + bad.Reason
	}
	if IsReserved(name) {
		return "the type name " + reservedReason
	}
	return ""
}

// ReservedPrefix starts the type names of the events Cairn records for
// itself (a saga's step records, an aggregate's recorded rejections). No
// type may be registered under such a name, and no upcaster may apply to
// one, so that a user's codec can never claim or rewrite Cairn's own
// records; the readers that meet them in a stream (aggregate loads,
// projections, [Registry.DecodeAll]) skip them rather than decode them.
// [Registry.Decode] of one fails with [ErrUnknownType]: it decodes what it
// is given.
const ReservedPrefix = "cairn."

// IsReserved reports whether name is one of Cairn's own type names: it
// starts with [ReservedPrefix].
func IsReserved(name string) bool { return strings.HasPrefix(name, ReservedPrefix) }

const reservedReason = `starts with "` + ReservedPrefix + `", which Cairn keeps for the events it records for itself`

// Upcast adds upcaster steps, built with the constructors of package
// upcast. A malformed step, a step for a reserved type name (see
// [ReservedPrefix]), or a second step for one (type, version), is an
// error here and again from [Registry.Validate]; the whole chain is
// checked against the registered types by Validate. After the registry is
// frozen it returns [ErrFrozen].
func (r *Registry) Upcast(steps ...upcast.Step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen.Load() {
		return fmt.Errorf("add upcasters: %w", ErrFrozen)
	}
	var errs []error
	kept := steps[:0:0]
	for _, s := range steps {
		if IsReserved(s.From().Type) {
			errs = append(errs, &upcast.ChainError{Key: s.From(), Step: s.String(), Reason: "applies to a type name that " + reservedReason, Err: upcast.ErrInvalidStep})
			continue
		}
		kept = append(kept, s)
	}
	if err := r.chain.Add(kept...); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		r.setupErrs = append(r.setupErrs, err)
		return err
	}
	return nil
}

// Validate checks the set-up once and freezes the registry: every
// registration problem, and every problem of the upcaster chain (a gap, two
// steps for one type and version, a rename cycle, a chain that does not end
// at a registered type and version), joined in one error that matches
// [ErrInvalidSetup] and each problem's own sentinel. Later calls return the
// same result.
func (r *Registry) Validate() error {
	if r.frozen.Load() {
		return r.setupErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen.Load() {
		return r.setupErr
	}
	errs := append([]error(nil), r.setupErrs...)
	if err := r.chain.Validate(r.current); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		r.setupErr = fmt.Errorf("%w: %w", ErrInvalidSetup, errors.Join(errs...))
	}
	r.frozen.Store(true)
	return r.setupErr
}

// ready validates the registry on first use, so that no Encode or Decode
// runs on a set-up that is still changing or is wrong.
func (r *Registry) ready() error {
	if r.frozen.Load() {
		return r.setupErr
	}
	return r.Validate()
}

func (r *Registry) current(name string) (uint32, bool) {
	if e, ok := r.byName[name]; ok {
		return e.version, true
	}
	return 0, false
}

// NameOf returns the type name and current schema version registered for
// T.
//
// Unlike Encode and Decode, it does not freeze the registry, so set-up code
// may call it between registrations.
func NameOf[T any](r *Registry) (name string, version uint32, ok bool) {
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	e, ok := r.byType[reflect.TypeFor[T]()]
	if !ok {
		return "", 0, false
	}
	return e.name, e.version, true
}

// NameOfType returns the type name and current schema version registered
// for Go type t (a pointer's element type): [NameOf] for a type known only
// at run time. It does not freeze the registry.
func (r *Registry) NameOfType(t reflect.Type) (name string, version uint32, ok bool) {
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	e, ok := r.byType[t]
	if !ok {
		return "", 0, false
	}
	return e.name, e.version, true
}

// Reads reports whether the registry reads stored events of type name at
// schema version (0: at some version): a registered type, or one an
// upcaster step renames, transforms, splits or drops at that version. A
// consumer that meets a name it does not read can say so rather than pass
// over its events in silence: it is a type renamed without its
// [upcast.Rename] step, or one the code no longer registers. It does not
// freeze the registry.
func (r *Registry) Reads(name string, version uint32) bool {
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	if _, ok := r.byName[name]; ok {
		return true
	}
	if version == 0 {
		_, ok := r.chain.NewestVersion(name)
		return ok
	}
	return r.chain.Has(upcast.Key{Type: name, Version: version})
}

// SourceTypes returns every stored type name that decodes, through the
// upcasters, to one of the given current type names, those names
// included. Subscribe and ReadAll filter by stored type name before any
// upcasting, so a consumer that filters by type must ask for all of them:
//
//	filter := eventstore.Filter{Types: reg.SourceTypes("finance.payment_received")}
//
// It does not freeze the registry.
func (r *Registry) SourceTypes(names ...string) []string {
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	return r.chain.Sources(names...)
}
