package codec_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// The differential tests hold the JSON serializer to encoding/json: data
// decoded into a new T by encoding/json, by codec.JSON{}.Unmarshal, and as
// a registered event type when T can be one (a registry decodes into a zero
// value, which takes a faster way: see jsonDecoding), must have one
// outcome: the same value, bit for bit, or an error from each.

// decodesLikeEncodingJSON requires data to decode into a new T as
// encoding/json decodes it, both ways the codec decodes.
func decodesLikeEncodingJSON[T any](t *testing.T, data []byte) {
	t.Helper()
	if d := decodeOutcomes[T](t, data, nil); d != "" {
		t.Fatal(d)
	}
}

// decodesIntoLikeEncodingJSON requires data to decode into the value mk
// makes (one that may already hold something) as encoding/json decodes
// into another such value: the same outcome, and where both decode, the
// same value bit for bit.
func decodesIntoLikeEncodingJSON[T any](t *testing.T, mk func() T, data string) {
	t.Helper()
	want, got := mk(), mk()
	wantErr := json.Unmarshal([]byte(data), &want)
	gotErr := codec.JSON{}.Unmarshal([]byte(data), &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Errorf("%s into %T: encoding/json %v, codec %v", data, want, wantErr, gotErr)
		return
	}
	if wantErr == nil && !bitsEqual(reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem()) {
		t.Errorf("%s into %T:\nencoding/json %#v\ncodec         %#v", data, want, want, got)
	}
}

// decodeOutcomes describes every way the codec's decodings of data into a
// new T differ from encoding/json's ("" if none). before runs before each
// decoding (to reset what a stateful method keeps). Each decoding is given
// its own copy of data, as a method may change the bytes it is given.
func decodeOutcomes[T any](t testing.TB, data []byte, before func()) string {
	t.Helper()
	if before == nil {
		before = func() {}
	}
	var want T
	before()
	wantErr := json.Unmarshal(append([]byte(nil), data...), &want)

	var got T
	before()
	gotErr := codec.JSON{}.Unmarshal(append([]byte(nil), data...), &got)
	diffs := compareDecoding("codec.JSON{}.Unmarshal", data, want, wantErr, got, gotErr)

	if reg := registryOf[T](t); reg != nil {
		before()
		decoded, regErr := decodeRegistered(reg, append([]byte(nil), data...))
		var regVal T
		if regErr == nil {
			regVal = decoded.(T)
		} else if !errors.Is(regErr, codec.ErrUndecodable) {
			diffs += fmt.Sprintf("Registry.DecodeCurrent: %q into %T: %v is not ErrUndecodable\n", data, want, regErr)
		}
		diffs += compareDecoding("Registry.DecodeCurrent", data, want, wantErr, regVal, regErr)
	}
	return diffs
}

func compareDecoding[T any](who string, data []byte, want T, wantErr error, got T, gotErr error) string {
	switch {
	case wantErr != nil && gotErr == nil:
		return fmt.Sprintf("%s: %q into %T: encoding/json refuses (%v), codec decodes %#v\n", who, data, want, wantErr, got)
	case wantErr == nil && gotErr != nil:
		return fmt.Sprintf("%s: %q into %T: encoding/json decodes %#v, codec refuses (%v)\n", who, data, want, want, gotErr)
	case wantErr == nil && !bitsEqual(reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem()):
		return fmt.Sprintf("%s: %q into %T: encoding/json decodes %#v, codec %#v\n", who, data, want, want, got)
	}
	return ""
}

var (
	registriesMu sync.Mutex
	// registries holds a registry per Go type, which has it registered as
	// "decoded" v1, and nil for a type that cannot register (any, for one).
	registries = map[reflect.Type]*codec.Registry{}
)

// registryOf returns the registry of T (see registries).
func registryOf[T any](t testing.TB) *codec.Registry {
	t.Helper()
	registriesMu.Lock()
	defer registriesMu.Unlock()
	typ := reflect.TypeFor[T]()
	reg, ok := registries[typ]
	if !ok {
		reg = codec.NewRegistry(codec.Options{})
		if err := codec.Register[T](reg, "decoded", 1); err != nil || reg.Validate() != nil {
			reg = nil
		}
		registries[typ] = reg
	}
	return reg
}

// decodeRegistered decodes data as the registered type of reg.
func decodeRegistered(reg *codec.Registry, data []byte) (any, error) {
	v, _, err := reg.DecodeCurrent(&eventstore.Event{EventData: eventstore.EventData{Type: "decoded", SchemaVersion: 1, Data: data}})
	return v, err
}

// bitsEqual is reflect.DeepEqual with floats compared bit for bit (so -0
// and +0 differ), at any depth, unexported fields included.
func bitsEqual(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Complex64, reflect.Complex128:
		x, y := a.Complex(), b.Complex()
		return math.Float64bits(real(x)) == math.Float64bits(real(y)) && math.Float64bits(imag(x)) == math.Float64bits(imag(y))
	case reflect.Struct:
		for i := range a.NumField() {
			if !bitsEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		for i := range a.Len() {
			if !bitsEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !bitsEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return bitsEqual(a.Elem(), b.Elem())
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !bitsEqual(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return a.Pointer() == b.Pointer()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	}
	panic("bitsEqual: " + a.Kind().String())
}
