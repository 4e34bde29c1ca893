package codec

import (
	"encoding/json"
	"reflect"
	"strings"
	"unicode/utf8"
)

// RoundTrip returns the value that decoding v's encoding gives back (for
// a v that encodes: not a NaN or an infinite float), and true, when the registry knows it without decoding: v is a registered T
// (or a non-nil *T) at its current version, which no upcaster rewrites, and
// T's round trip through the serializer is exact, so the decoded value is
// v itself (a *T's is the T it points to). Otherwise it returns false, and
// only [Registry.Decode] of the encoded event tells.
//
// A writer that applies what it appended, as an aggregate's Save does, can
// then apply v as it is and spare the decoding, and still build the state
// that a replay of the stored events builds.
//
// A round trip is known to be exact only with the default [JSON]
// serializer, and only for a T made of booleans, integers, floats and
// strings, in structs and arrays: no pointer, slice, map or interface
// (whose values a decode does not give back as they were: a nil slice
// comes back empty or the other way round, and a decoded value shares no
// memory with the caller's), no type with its own JSON or text encoding
// (time.Time among them) or an IsZero method, not json.Number, every
// struct field exported, not embedded, not dropped by a "-" tag, named
// apart from its siblings, and no float (nor struct or array holding one)
// left out when empty or zero (-0 is both, and comes back as +0). A string
// that is not valid UTF-8 is encoded with replacement characters, so
// RoundTrip checks every string of v and returns false for such a value.
func (r *Registry) RoundTrip(v any) (any, bool) {
	if !r.frozen.Load() || r.setupErr != nil || v == nil {
		return nil, false
	}
	e, ok := r.entryOf(reflect.TypeOf(v))
	if !ok {
		return nil, false
	}
	return e.roundTrip(v)
}

// roundTrip is [Registry.RoundTrip] for a v of e's Go type T, or a *T.
func (e *entry) roundTrip(v any) (any, bool) {
	if !e.exact {
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Type() != e.goType {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
		v = rv.Interface()
	}
	if e.strings != nil && !e.strings(rv) {
		return nil, false
	}
	return v, true
}

// exactJSON reports whether every value of t comes back equal, and
// sharing nothing with the original, from a round trip through
// encoding/json (see [Registry.RoundTrip]), and returns the check of its
// strings' UTF-8 that the round trip also needs (nil when t holds no
// string).
func exactJSON(t reflect.Type) (exact bool, strings func(reflect.Value) bool) {
	if ownEncoding(t) || t == jsonNumber {
		return false, nil
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true, nil
	case reflect.String:
		return true, func(v reflect.Value) bool { return utf8.ValidString(v.String()) }
	case reflect.Array:
		exact, elem := exactJSON(t.Elem())
		if !exact || elem == nil {
			return exact, nil
		}
		return true, func(v reflect.Value) bool {
			for i := range v.Len() {
				if !elem(v.Index(i)) {
					return false
				}
			}
			return true
		}
	case reflect.Struct:
		return exactStruct(t)
	}
	return false, nil // pointers, slices, maps, interfaces, complex numbers, uintptr, ...
}

// exactStruct is exactJSON for a struct type.
func exactStruct(t reflect.Type) (bool, func(reflect.Value) bool) {
	type stringField struct {
		index int
		check func(reflect.Value) bool
	}
	var checks []stringField
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			return false, nil
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if empty, zero := omissions(opts); empty && isFloat(f.Type) || zero && holdsFloat(f.Type) {
			// -0 is an empty float, and a zero one (reflect.Value.IsZero),
			// which makes a struct or an array holding only zeros and -0
			// zero too: the field is left out, and comes back as +0.
			// (omitempty leaves out no struct, and no array but one of
			// length 0.)
			return false, nil
		}
		if name == "-" {
			return false, nil // dropped by the encoder (or, as "-,", a field named "-": rare, left to decoding)
		}
		if name == "" {
			name = f.Name
		}
		// encoding/json matches names case-insensitively (with its own
		// folding), drops fields whose names collide, and ignores a tag
		// name it finds invalid: keep to plain ASCII names that differ in
		// more than case.
		key := strings.ToLower(name)
		for _, c := range key {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false, nil
			}
		}
		if names[key] {
			return false, nil
		}
		names[key] = true
		exact, check := exactJSON(f.Type)
		if !exact {
			return false, nil
		}
		if check != nil {
			checks = append(checks, stringField{index: i, check: check})
		}
	}
	if len(checks) == 0 {
		return true, nil
	}
	return true, func(v reflect.Value) bool {
		for _, c := range checks {
			if !c.check(v.Field(c.index)) {
				return false
			}
		}
		return true
	}
}

// jsonNumber is encoding/json's own number type, a string that it writes
// as a number: the empty one as 0.
var jsonNumber = reflect.TypeFor[json.Number]()

// isFloat reports whether t is a float type.
func isFloat(t reflect.Type) bool { return t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64 }

// holdsFloat reports whether t is a float, or a struct or array that holds
// one at any depth (the only other kinds an exact type has are booleans,
// integers and strings).
func holdsFloat(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return true
	case reflect.Array:
		return holdsFloat(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsFloat(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// omissions reports which of omitempty and omitzero a field's json tag
// options (after its name) hold.
func omissions(opts string) (empty, zero bool) {
	for opts != "" {
		var opt string
		opt, opts, _ = strings.Cut(opts, ",")
		empty = empty || opt == "omitempty"
		zero = zero || opt == "omitzero"
	}
	return empty, zero
}

// ownEncoding reports whether t (or *t) has methods that encoding/json or
// its successor would call instead of encoding t's fields, or to decide
// that t is zero (omitzero calls IsZero): whatever they do, a round trip
// through them is not known to be exact.
func ownEncoding(t reflect.Type) bool {
	return hasMethod(t, "MarshalJSON", "UnmarshalJSON", "MarshalJSONTo", "UnmarshalJSONFrom",
		"MarshalText", "UnmarshalText", "AppendText", "IsZero")
}
