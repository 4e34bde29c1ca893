package sqlite_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// TestStoreFilesAreOwnerOnly: issue 22, finding 4. Store files and their
// -wal and -shm were created world-readable under the usual umask, and a
// process of another local user read an event's payload from the WAL.
// They are created 0600 now (Options.FileMode says otherwise), and, when
// the test runs as root, a process of another user ('nobody') cannot read
// them, in a folder it may enter.
func TestStoreFilesAreOwnerOnly(t *testing.T) {
	dir, err := os.MkdirTemp("", "cairn-perm-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755), "another user may enter the folder: the files' own permissions are what is tested")
	ctx := context.Background()
	path := filepath.Join(dir, "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Append(ctx, "account-1", eventstore.NoStream, eventstore.EventData{Type: "opened", Data: []byte(`{"card":"4111 1111 1111 1111"}`)})
	require.NoError(t, err)

	files := []string{path, path + "-wal", path + "-shm"}
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err, "%s exists while the store is open", f)
		assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "%s", f)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: reading as another user is not tried")
		return
	}
	for _, f := range files {
		cat := exec.Command("cat", f)
		cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cat.CombinedOutput()
		assert.Error(t, err, "user nobody read %s (%d bytes)", f, len(out))
		assert.NotContains(t, string(out), "4111")
	}
}

// TestFileModeOptionSetsANewFilesPermissions: Options.FileMode is the
// permissions of a file Open creates; an existing file keeps its own.
func TestFileModeOptionSetsANewFilesPermissions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{FileMode: 0o640})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())

	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), "an existing file keeps its permissions")
}
