package aggregate

import (
	"errors"
	"fmt"
)

// errSnapshotPastEnd tells Load that a restored snapshot claims a version
// the stream does not have.
var errSnapshotPastEnd = errors.New("snapshot past the end of its stream")

func typeName(v any) string { return fmt.Sprintf("%T", v) }
