//go:build unix

package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

const fileSizeChildEnv = "CAIRN_SQLITE_FILE_SIZE_CHILD"

// A file system that refuses to write (here the process's file size limit,
// as a full disk would) fails Open's building of the type index and an
// append with a typed error naming the file, writes nothing of either, and
// leaves a file that opens and reads whole once the limit is gone. The
// limit is the whole process's, so a child process runs under it.
func TestWritesTheFileSystemRefuses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	for i := range 20 {
		batch := make([]eventstore.EventData, 100)
		for j := range batch {
			// Long types: their index takes more than the child's limit.
			batch[j] = eventstore.EventData{Type: fmt.Sprintf("type-%d-%d-%s", i, j, strings.Repeat("t", 100)),
				Data: []byte(`{"note":"` + strings.Repeat("x", 100) + `"}`)}
		}
		_, err := s.Append(ctx, fmt.Sprintf("order-%d", i), eventstore.NoStream, batch...)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFileSizeChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fileSizeChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child:\n%s", out)
	require.Contains(t, string(out), "refused as expected", "the child:\n%s", out)

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	n := 0
	for _, err := range s.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 2000, n)
	for _, err := range s.ReadStream(ctx, "big", eventstore.Forward(0)) {
		require.NoError(t, err)
		t.Fatal("the refused append was written")
	}
}

// TestHelperFileSizeChild is the child of TestWritesTheFileSystemRefuses.
func TestHelperFileSizeChild(t *testing.T) {
	path := os.Getenv(fileSizeChildEnv)
	if path == "" {
		t.Skip("runs only as the child of TestWritesTheFileSystemRefuses")
	}
	ctx := context.Background()
	var unlimited syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &unlimited))
	limited := unlimited
	limited.Cur = 128 << 10 // smaller than the file: every page the writes add lies past it
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited))

	refused := func(err error) {
		t.Helper()
		var fe *sqlite.FileError
		require.ErrorAs(t, err, &fe)
		require.ErrorIs(t, err, sqlite.ErrIO)
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
		require.Contains(t, err.Error(), path)
	}
	_, err := sqlite.Open(ctx, path, sqlite.Options{TypeIndex: true})
	refused(err)

	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Append(ctx, "big", eventstore.NoStream, eventstore.EventData{Type: "big",
		Data: []byte(`"` + strings.Repeat("x", 256<<10) + `"`)})
	refused(err)
	require.Contains(t, err.Error(), `"big"`, "the error names the stream")
	for _, err := range s.ReadStream(ctx, "big", eventstore.Forward(0)) {
		require.NoError(t, err)
		t.Fatal("the refused append is read back")
	}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &unlimited))
	require.NoError(t, s.Close())
	fmt.Println("refused as expected")
}
