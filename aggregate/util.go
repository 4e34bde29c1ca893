package aggregate

import (
	"errors"
	"fmt"
	"reflect"
)

// errSnapshotPastEnd tells Load that a restored snapshot claims a version
// the stream does not have.
var errSnapshotPastEnd = errors.New("snapshot past the end of its stream")

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// isNil reports whether v is nil or a nil pointer, which the codec does
// not encode (a nil slice or map may well be an event's value).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
