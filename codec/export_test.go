package codec

import (
	"reflect"
	"unsafe"
)

// IsPlain reports whether values of t take the plain codec.
func IsPlain(t reflect.Type) bool { return plainCodecOf(t) != nil }

// PlainDecode decodes data into a zero T with T's plain codec, which must
// exist, and reports whether the codec took data.
func PlainDecode[T any](data []byte) (T, bool) {
	var v T
	return v, plainCodecOf(reflect.TypeFor[T]()).decode(data, unsafe.Pointer(&v))
}

// PlainEncode encodes v with T's plain codec, which must exist, and
// reports whether the codec took v.
func PlainEncode[T any](v T) ([]byte, bool) {
	return plainCodecOf(reflect.TypeFor[T]()).encode(unsafe.Pointer(&v))
}
