package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

// SQLite's full-disk and I/O results are ErrIO, and a failed sync says
// that what it was committing may yet be found: unlike a failed write, its
// commit is already in the log.
func TestFileSystemFailuresAreErrIO(t *testing.T) {
	for _, c := range []struct {
		code   zs.ResultCode
		unsure bool
	}{
		{zs.ResultFull, false}, {zs.ResultIOErrWrite, false}, {zs.ResultIOErrRead, false},
		{zs.ResultIOErrFsync, true}, {zs.ResultIOErrDirFsync, true},
	} {
		err := fileErr("/data/events.db", `append to stream "order-1"`, c.code.ToError())
		require.NotNil(t, err, "%v", c.code)
		assert.ErrorIs(t, err, ErrIO, "%v", c.code)
		assert.ErrorIs(t, err, eventstore.ErrUnavailable, "%v", c.code)
		assert.Contains(t, err.Error(), "/data/events.db")
		assert.Contains(t, err.Error(), `"order-1"`)
		assert.Equal(t, c.unsure, strings.Contains(err.Error(), "may or may not be found after a restart"), "%v: %v", c.code, err)
	}
}
