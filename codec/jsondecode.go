package codec

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/checked"
)

// unmarshalJSON decodes data into v (a pointer) with encoding/json's rules:
// on encoding/json/v2 when every value of v's type decodes there as
// encoding/json decodes it (see decodesOnV2), with encoding/json itself
// otherwise; into a zero value the quicker way a registry decodes.
func unmarshalJSON(data []byte, v any) error {
	p := reflect.ValueOf(v)
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return json.Unmarshal(data, v) // which says what is wrong with v
	}
	d := jsonDecodingOf(p.Type())
	if zeroBits(p.UnsafePointer(), p.Type().Elem().Size()) {
		return d.fresh(data, v) // the target is new: see jsonDecoding
	}
	return d.into(data, v)
}

// zeroBits reports whether the size bytes at p are all zero, which makes
// the value there its type's zero value bit for bit, as fresh requires: it
// may reset the value to zero and decode again, and a value that only
// compares equal to zero would then change where encoding/json leaves it
// as it was (reflect's IsZero takes a -0 float for zero).
func zeroBits(p unsafe.Pointer, size uintptr) bool {
	for _, b := range unsafe.Slice((*byte)(p), size) {
		if b != 0 {
			return false
		}
	}
	return true
}

// jsonDecoding is how values of one pointer type decode with encoding/json's
// rules, decided for the type once: a registered type takes its decoding
// when it is registered, so that decoding an event does not look its type
// up again (that lookup was a tenth of decoding a small event).
type jsonDecoding struct {
	// into decodes into the value any pointer of the type points to.
	into func(data []byte, v any) error
	// fresh decodes into a zero value, with the same outcome as into,
	// sooner.
	fresh func(data []byte, v any) error
}

// jsonDecodingOf returns the decoding of the pointer type t.
func jsonDecodingOf(t reflect.Type) jsonDecoding {
	d, known := jsonDecodings.Load(t)
	if !known {
		d, _ = jsonDecodings.LoadOrStore(t, chooseJSONDecoding(t))
	}
	return d.(jsonDecoding)
}

// jsonDecodings caches chooseJSONDecoding by type, as encoding/json caches
// what it knows of a type: a fact about the type, the same for every
// registry.
var jsonDecodings sync.Map // reflect.Type -> jsonDecoding

// chooseJSONDecoding is how values of the pointer type t decode: on
// encoding/json/v2 when t decodes there as on encoding/json, without v2's
// time.Time unmarshaler when no value of t can hold a time.Time, and with
// encoding/json otherwise; into a zero value first with v2's error
// reporting when decoding t calls no method of its own (fresh, below).
func chooseJSONDecoding(t reflect.Type) jsonDecoding {
	if !decodesOnV2(t, map[reflect.Type]bool{}) {
		return jsonDecoding{into: json.Unmarshal, fresh: json.Unmarshal}
	}
	rules := decodeLikeV1
	if !mayHoldTime(t) {
		rules = decodeLikeV1Timeless
	}
	into := func(data []byte, v any) error { return jsonv2.Unmarshal(data, v, rules) }
	if callsOwnMethods(t) {
		return jsonDecoding{into: into, fresh: into}
	}
	strict := jsonv2.JoinOptions(rules, jsonv1.ReportErrorsWithLegacySemantics(false))
	return jsonDecoding{
		into: into,
		fresh: func(data []byte, v any) error {
			// Where encoding/json's rules with v2's error reporting decode
			// data, encoding/json's own reporting decodes the same value
			// (it differs only in what it refuses and how it says so):
			// the stricter decoding goes first, for it does not check the
			// whole input's syntax before decoding, a sixth of decoding a
			// small event. What it refuses is decoded again, from zero,
			// for encoding/json's outcome and error. Nothing can tell the
			// first pass happened: t calls no method of its own.
			if jsonv2.Unmarshal(data, v, strict) == nil {
				return nil
			}
			reflect.ValueOf(v).Elem().SetZero()
			return jsonv2.Unmarshal(data, v, rules)
		},
	}
}

// callsOwnMethods reports whether decoding into a zero value of type t may
// call a decoding method (UnmarshalJSON, UnmarshalText) of a type other
// than those of pureDecoders, at any depth. Such a method may count its
// calls, keep or change the bytes it is given, or panic on what
// encoding/json would refuse for its syntax before calling it: decoding
// it twice, or before the syntax is checked, could be seen. (An interface
// in a zero value is nil, and decodes as JSON's own kinds.) A pointer has
// no methods of its own: those it shows are its pointee's, which the walk
// looks at next (and passes over when they are pure).
func callsOwnMethods(t reflect.Type) bool {
	return holds(t, map[reflect.Type]bool{}, func(t reflect.Type) bool {
		return t.Kind() != reflect.Pointer && hasMethod(t, "UnmarshalJSON", "UnmarshalText")
	}, pureDecoders)
}

// pureDecoders are the types whose decoding methods keep nothing of their
// input, change none of it, touch nothing but their value and never
// panic: those of the standard library and of this project's dependencies
// that events commonly hold, the store position (saga records hold both
// it and event IDs), and the checked bytes that stand in for the payloads
// of a saga record that a scan of records reads without them.
var pureDecoders = map[reflect.Type]bool{
	timeType:                               true,
	reflect.TypeFor[json.RawMessage]():     true,
	reflect.TypeFor[uuid.UUID]():           true,
	reflect.TypeFor[eventstore.Position](): true,
	reflect.TypeFor[checked.Bytes]():       true,
}

// decodeLikeV1Timeless are encoding/json's decoding rules on
// encoding/json/v2, for values that hold no time.Time.
var decodeLikeV1Timeless = jsonv1.DefaultOptionsV1()

// decodeLikeV1 are encoding/json's decoding rules on encoding/json/v2. A
// time.Time decodes through its own UnmarshalJSON, given the JSON value as
// it is, as encoding/json does: v2 would first unescape the string, and
// accept a time that encoding/json refuses. v2 looks that unmarshaler up at
// every value it decodes, a tenth of decoding a small event, which
// decodeLikeV1Timeless spares the values it cannot apply to.
var decodeLikeV1 = jsonv2.JoinOptions(
	decodeLikeV1Timeless,
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *time.Time) error {
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return t.UnmarshalJSON(raw)
	})),
)

var timeType = reflect.TypeFor[time.Time]()

// mayHoldTime reports whether decoding into a value of type t may decode a
// time.Time: t is one, or one is in a field, element, key or pointee of t
// at any depth, or t has an interface at some depth (the value decoded
// into may hold a pointer to one, which encoding/json fills). A type with
// its own decoding method is walked like any other: a time.Time that its
// method decodes instead only keeps the type on decodeLikeV1, which also
// decodes it right.
func mayHoldTime(t reflect.Type) bool {
	return holds(t, map[reflect.Type]bool{}, func(t reflect.Type) bool {
		return t == timeType || t.Kind() == reflect.Interface
	}, nil)
}

// holds reports whether t, or a type in a field, element, key or pointee
// of t at any depth, is one that is reports, not looking into the types
// in skip.
//
// seen holds the types under way, for recursive types.
func holds(t reflect.Type, seen map[reflect.Type]bool, is func(reflect.Type) bool, skip map[reflect.Type]bool) bool {
	if skip[t] || seen[t] {
		return false
	}
	seen[t] = true
	if is(t) {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holds(t.Elem(), seen, is, skip)
	case reflect.Map:
		return holds(t.Key(), seen, is, skip) || holds(t.Elem(), seen, is, skip)
	case reflect.Struct:
		for i := range t.NumField() {
			if holds(t.Field(i).Type, seen, is, skip) {
				return true
			}
		}
	}
	return false
}

// decodesOnV2 reports whether encoding/json's rules on encoding/json/v2
// decode every value of t as encoding/json does. They do but for what the
// differential tests (jsondecode_test.go) and a review found, which keeps t
// on encoding/json:
//   - a type with v2's own methods (UnmarshalJSONFrom, MarshalJSONTo),
//     which v2 calls and encoding/json does not know;
//   - encoding/json's Number, which v2's v1 rules know as another type;
//   - a struct tag name encoding/json finds invalid (it then uses the
//     field's name) or a tag option it does not know (v2 knows more:
//     inline, unknown, format, case);
//   - a map whose keys encoding/json cannot decode (floats, booleans, ...),
//     which v2 decodes, or whose key type has its own UnmarshalJSON
//     (encoding/json calls it, given the quoted key, on a key that also
//     unmarshals text; v2 calls UnmarshalText).
//
// seen holds the types under way, for recursive types.
func decodesOnV2(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t == jsonNumber || hasMethod(t, "UnmarshalJSONFrom", "MarshalJSONTo") {
		return false
	}
	if hasMethod(t, "UnmarshalJSON") {
		return true // its own method decodes it, on either
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return decodesOnV2(t.Elem(), seen)
	case reflect.Map:
		// encoding/json decodes a key that unmarshals text with its
		// UnmarshalJSON when it has one too, given the quoted key; v2
		// calls UnmarshalText.
		if hasMethod(t.Key(), "UnmarshalJSON") {
			return false
		}
		return mapKeyDecodes(t.Key()) && decodesOnV2(t.Key(), seen) && decodesOnV2(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue // neither decodes it
			}
			if !plainTag(f.Tag.Get("json")) || !decodesOnV2(f.Type, seen) {
				return false
			}
		}
	}
	return true
}

// hasMethod reports whether t or *t has one of the methods.
func hasMethod(t reflect.Type, names ...string) bool {
	for _, name := range names {
		if _, ok := t.MethodByName(name); ok {
			return true
		}
		if _, ok := reflect.PointerTo(t).MethodByName(name); ok {
			return true
		}
	}
	return false
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// mapKeyDecodes reports whether encoding/json decodes map keys of type k:
// strings, integers, and types that unmarshal text.
func mapKeyDecodes(k reflect.Type) bool {
	if reflect.PointerTo(k).Implements(textUnmarshaler) {
		return true
	}
	switch k.Kind() {
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// plainTag reports whether a json struct tag means the same to both: a
// name encoding/json accepts (or none, or "-") and only the options it
// knows.
func plainTag(tag string) bool {
	name, opts, _ := strings.Cut(tag, ",")
	if name != "" && name != "-" && !validTagName(name) {
		return false
	}
	for opts != "" {
		var opt string
		opt, opts, _ = strings.Cut(opts, ",")
		if opt != "omitempty" && opt != "omitzero" && opt != "string" {
			return false
		}
	}
	return true
}

// validTagName is encoding/json's test of a tag name: letters, digits and
// punctuation other than quotes and backslashes.
func validTagName(name string) bool {
	for _, c := range name {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}
