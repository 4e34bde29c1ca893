package codec_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// s11Same reports whether a and b are the same value bit for bit: floats
// are compared by their bits (-0 is not +0), everything else with ==.
func s11Same(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32:
		return math.Float32bits(float32(a.Float())) == math.Float32bits(float32(b.Float()))
	case reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Struct:
		for i := range a.NumField() {
			if !s11Same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		for i := range a.Len() {
			if !s11Same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func s11SameValues[T any](a, b T) bool { return s11Same(reflect.ValueOf(a), reflect.ValueOf(b)) }

// s11CheckDecode holds the plain codec of T to promise 2 on data: when it
// takes data, encoding/json.Unmarshal into a new T succeeds and gives the
// same value bit for bit. It returns whether the plain codec took data.
func s11CheckDecode[T any](t testing.TB, data []byte) bool {
	t.Helper()
	got, ok := codec.PlainDecode[T](data)
	if !ok {
		return false
	}
	var want T
	err := json.Unmarshal(data, &want)
	require.NoError(t, err, "plain codec took %q (into %#v) but encoding/json refuses it", data, got)
	require.True(t, s11SameValues(want, got), "%q:\nencoding/json %#v\nplain         %#v", data, want, got)
	return true
}

// s11CheckEncode holds the plain codec of T to promise 1 on v: when it
// writes v, it writes what json.Marshal writes. It returns whether the
// plain codec took v.
func s11CheckEncode[T any](t testing.TB, v T) bool {
	t.Helper()
	got, ok := codec.PlainEncode(v)
	want, err := json.Marshal(v)
	if !ok {
		return false
	}
	require.NoError(t, err, "plain codec wrote %#v as %s but encoding/json refuses it", v, got)
	require.Equal(t, string(want), string(got), "%#v", v)
	return true
}
