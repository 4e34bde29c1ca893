//go:build unix

package sqlite_test

import (
	"context"
	"errors"
	"io"
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

// unprivilegedEnv marks the child process that unprivileged starts.
const unprivilegedEnv = "CAIRN_SQLITE_TEST_UNPRIVILEGED"

// nobody is the user the child runs as.
const nobody = 65534

// unprivileged makes the calling test run without root's power over file
// modes, which would make every file writable (CI runs as root). As root,
// it runs the test in a copy of the test binary as the user nobody, reports
// the child's outcome and returns false: the caller must return. Otherwise
// it returns true and the caller goes on. When the system refuses to start
// a process as nobody, the test is skipped, saying so.
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Getenv(unprivilegedEnv) != "" {
		require.NotZero(t, os.Geteuid(), "the child still runs as root")
		return true
	}
	if os.Geteuid() != 0 {
		return true
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "cairn-unprivileged-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "sqlite.test")
	copyFile(t, exe, bin)
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	require.NoError(t, os.Chown(tmp, nobody, nobody))

	cmd := exec.Command(bin, "-test.run", "^"+t.Name()+"$", "-test.v", "-test.timeout", "5m")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), unprivilegedEnv+"=1", "TMPDIR="+tmp, "GOCOVERDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("root ignores file modes, and this test could not start itself as the user nobody (uid %d): %v", nobody, err)
	}
	require.NoError(t, err, "as the user nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "as the user nobody:\n%s", out)
	t.Logf("ran as the user nobody (uid %d):\n%s", nobody, out)
	return false
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// A file this process may not write is refused at Open, by name, with
// ErrReadOnly, and left as it was; with Options.ReadOnly it is read, and
// writes are refused by name. (Before, Open accepted it and every write
// failed with SQLite's bare "attempt to write a readonly database".)
func TestOpenReadOnlyFile(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	newStoreFile(t, path)
	require.NoError(t, os.Chmod(path, 0o444))

	before := dirState(t, dir)
	_, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	require.ErrorIs(t, err, fs.ErrPermission)
	var fe *sqlite.FileError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, path, fe.Path)
	assert.Contains(t, err.Error(), "Options.ReadOnly")
	assert.Equal(t, before, dirState(t, dir))

	s, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	require.Len(t, collect(t, s.ReadStream(ctx, "order-1", eventstore.Forward(0))), 1)
	_, err = s.Append(ctx, "order-1", eventstore.Any, event("order.paid"))
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	assert.Contains(t, err.Error(), path)
}

// A folder this process may not write cannot take a new store, nor the
// -wal and -shm files of an existing one: both are refused by name.
func TestOpenInAFolderWithoutWritePermission(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	existing := filepath.Join(dir, "events.db")
	newStoreFile(t, existing)
	require.NoError(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	before := dirState(t, dir)

	missing := filepath.Join(dir, "new.db")
	_, err := sqlite.Open(ctx, missing, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrCannotOpen)
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), "cannot create the file in its folder")

	_, err = sqlite.Open(ctx, existing, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	require.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), existing)
	assert.Contains(t, err.Error(), "-wal and -shm")
	// Even a reader needs the -shm file of a WAL-mode file, and no writer
	// left one.
	_, err = sqlite.Open(ctx, existing, sqlite.Options{ReadOnly: true})
	require.ErrorIs(t, err, sqlite.ErrCannotOpen)
	assert.Contains(t, err.Error(), existing)
	assert.Contains(t, err.Error(), "-shm")
	assert.Equal(t, before, dirState(t, dir))
}

// A file this process may not even read is refused by name.
func TestOpenUnreadableFile(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	newStoreFile(t, path)
	require.NoError(t, os.Chmod(path, 0))
	for _, readOnly := range []bool{false, true} {
		_, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: readOnly})
		require.ErrorIs(t, err, sqlite.ErrCannotOpen)
		require.ErrorIs(t, err, fs.ErrPermission)
		assert.Contains(t, err.Error(), path)
	}
}
