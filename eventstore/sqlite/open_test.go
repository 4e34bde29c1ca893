//go:build unix

package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// TestOpenRefusesBadPaths is the table of paths that cannot hold a store.
// Each fails with a *sqlite.FileError of the right class that names the
// path, before SQLite touches it (SQLite said "out of memory", or blocked
// on a named pipe), and leaves the folder as it was.
func TestOpenRefusesBadPaths(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	fifoLink := filepath.Join(dir, "fifo-link")
	require.NoError(t, os.Symlink(fifo, fifoLink))
	regular := filepath.Join(dir, "regular.txt")
	require.NoError(t, os.WriteFile(regular, []byte("not a folder"), 0o600))
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	// Symbolic links that lead nowhere (issue 22: a dangling one recursed
	// until the process died of a stack overflow).
	dangling := filepath.Join(dir, "dangling.db")
	require.NoError(t, os.Symlink(filepath.Join(dir, "unmounted", "events.db"), dangling))
	chained := filepath.Join(dir, "chained.db")
	require.NoError(t, os.Symlink(dangling, chained))
	loopA, loopB := filepath.Join(dir, "loop-a.db"), filepath.Join(dir, "loop-b.db")
	require.NoError(t, os.Symlink(loopB, loopA))
	require.NoError(t, os.Symlink(loopA, loopB))
	tooLong := filepath.Join(dir, strings.Repeat("x", 300), "events.db")

	cases := []struct {
		name string
		path string
		opts sqlite.Options
		// is is the sentinel the error matches; also, when set, an error
		// the operating system gave.
		is, also error
		// says is a part of the message telling the cause.
		says string
	}{
		{name: "empty path", path: "", is: sqlite.ErrCannotOpen, says: "no path given"},
		{name: "directory", path: sub, is: sqlite.ErrCannotOpen, says: "a directory"},
		{name: "missing folder", path: filepath.Join(dir, "missing", "events.db"), is: sqlite.ErrCannotOpen, also: fs.ErrNotExist, says: "folder"},
		{name: "folder is a file", path: filepath.Join(regular, "events.db"), is: sqlite.ErrCannotOpen, also: syscall.ENOTDIR, says: "not a directory"},
		{name: "named pipe", path: fifo, is: sqlite.ErrCannotOpen, says: "a named pipe"},
		{name: "link to a named pipe", path: fifoLink, is: sqlite.ErrCannotOpen, says: "a named pipe"},
		{name: "device /dev/zero", path: "/dev/zero", is: sqlite.ErrCannotOpen, says: "a character device"},
		{name: "device /dev/null", path: "/dev/null", is: sqlite.ErrCannotOpen, says: "a character device"},
		{name: "read-only, missing file", path: filepath.Join(dir, "none.db"), opts: sqlite.Options{ReadOnly: true},
			is: sqlite.ErrCannotOpen, also: fs.ErrNotExist, says: "does not exist"},
		{name: "dangling symbolic link", path: dangling, is: sqlite.ErrCannotOpen, also: fs.ErrNotExist, says: "symbolic link"},
		{name: "chain of links to nowhere", path: chained, is: sqlite.ErrCannotOpen, also: fs.ErrNotExist, says: "symbolic link"},
		{name: "looping symbolic links", path: loopA, is: sqlite.ErrCannotOpen, also: syscall.ELOOP, says: "cannot look at the file"},
		{name: "name too long", path: tooLong, is: sqlite.ErrCannotOpen, also: syscall.ENAMETOOLONG},
		{name: "not a folder on the way", path: filepath.Join(regular, "deeper", "events.db"), is: sqlite.ErrCannotOpen, also: syscall.ENOTDIR},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := treeState(t, dir)
			// The deadline is the test's bound, not an assertion: Open must
			// refuse at once, not end with the context.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := sqlite.Open(ctx, c.path, c.opts)
			if s != nil {
				s.Close()
			}
			require.ErrorIs(t, err, c.is)
			if c.also != nil {
				require.ErrorIs(t, err, c.also)
			}
			var fe *sqlite.FileError
			require.ErrorAs(t, err, &fe)
			if c.path != "" {
				assert.Equal(t, c.path, fe.Path)
				assert.Contains(t, err.Error(), c.path, "the message names the path")
			}
			assert.Contains(t, err.Error(), c.says)
			assert.NotContains(t, err.Error(), "out of memory")
			assert.Equal(t, before, treeState(t, dir), "Open changed the folder")
		})
	}
}

// A folder that refuses new files even to root: sysfs lets no one create a
// file, so this case runs as root too (CI runs as root).
func TestOpenInAFolderNoOneMayWrite(t *testing.T) {
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no sysfs at /sys:", err)
	}
	path := "/sys/cairn-events.db"
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrCannotOpen)
	var fe *sqlite.FileError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, path, fe.Path)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe, "the operating system's error is kept")
	assert.Contains(t, err.Error(), "cannot create the file in its folder")
	assert.NoFileExists(t, path)
}

// A context that is already done fails Open with the context's error and
// creates nothing.
func TestOpenWithADoneContext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		s, err := sqlite.Open(c.ctx, path, sqlite.Options{})
		require.ErrorIs(t, err, c.want)
		require.Nil(t, s)
		assert.Empty(t, dirState(t, dir), "Open created a file")
	}
}

// The named pipe case once blocked until a writer came, past the context's
// deadline. Here a pipe replaces nothing: Open must return with the typed
// error while the context still has time, and the pipe is never opened (a
// writer waiting on it would then go on).
func TestOpenOnANamedPipeReturns(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "events.db")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := sqlite.Open(ctx, fifo, sqlite.Options{})
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Unblock the open, so the goroutine ends, and fail.
		if w, werr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
			w.Close()
		}
		t.Fatal("Open on a named pipe did not return")
	}
	require.ErrorIs(t, err, sqlite.ErrCannotOpen)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "Open refused the pipe, it did not wait for it")
}

// treeState maps every path under dir to its type and, for a regular file,
// its contents; unlike dirState it never opens a named pipe.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := make(map[string]string)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		state[path] = d.Type().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			state[path] += " " + string(b)
			return err
		}
		return nil
	})
	require.NoError(t, err)
	return state
}
