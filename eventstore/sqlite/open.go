package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkPath learns from the operating system whether path can hold the
// store, before SQLite touches it. SQLite reports a directory, a missing
// folder or a folder it may not write as "out of memory" or "unable to open
// database file", naming neither the path nor the cause, and opening a
// named pipe blocks until a writer comes, past any deadline. The os package
// says exactly what is wrong, and a stat never blocks.
//
// When the file does not exist and readOnly is false, checkPath creates it
// empty, as SQLite would: the create is what tells why a folder refuses a
// new file. An empty file is a new store to Open. It returns the absolute
// path.
func checkPath(path string, readOnly bool, mode fs.FileMode) (string, error) {
	// A file that another process creates between the stat and the create
	// is looked at again, a few times at most: a path that keeps claiming
	// to exist and not to exist (a dangling symbolic link does) must end
	// in an error, never in a recursion that overflows the stack.
	for range 3 {
		abs, err := checkPathOnce(path, readOnly, mode)
		if !errors.Is(err, errRaced) {
			return abs, err
		}
	}
	return "", &FileError{Path: path, Reason: "the file keeps appearing and vanishing", class: ErrCannotOpen}
}

// errRaced says another process created the file between the stat and the
// create.
var errRaced = errors.New("created meanwhile")

// checkPathOnce is one look of checkPath.
func checkPathOnce(path string, readOnly bool, mode fs.FileMode) (string, error) {
	if path == "" {
		// SQLite would open a private temporary database, which vanishes
		// at Close: never what a caller of Open means.
		return "", &FileError{Path: path, Reason: "no path given", class: ErrCannotOpen}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &FileError{Path: path, Reason: "cannot make the path absolute", Err: err, class: ErrCannotOpen}
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if li, lerr := os.Lstat(abs); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(abs)
			return "", &FileError{Path: abs, Reason: fmt.Sprintf("it is a symbolic link to %s, which does not exist (an unmounted volume, a deleted target?)", target),
				Err: err, class: ErrCannotOpen}
		}
		if readOnly {
			return "", &FileError{Path: abs, Reason: "the file does not exist, and Options.ReadOnly cannot create it", Err: err, class: ErrCannotOpen}
		}
		if err := checkFolder(abs); err != nil {
			return "", err
		}
		f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			// Another process created it since the stat: look at that file.
			return "", errRaced
		}
		if err != nil {
			return "", &FileError{Path: abs, Reason: "cannot create the file in its folder", Err: err, class: ErrCannotOpen}
		}
		if err := f.Chmod(mode); err != nil { // the umask may have taken bits the caller asked for
			f.Close()
			return "", &FileError{Path: abs, Reason: "cannot set the new file's permissions", Err: err, class: ErrCannotOpen}
		}
		return abs, f.Close()
	}
	if err != nil {
		return "", &FileError{Path: abs, Reason: "cannot look at the file", Err: err, class: ErrCannotOpen}
	}
	if err := regular(abs, fi); err != nil {
		return "", err
	}
	// O_NONBLOCK: should a named pipe replace the file since the stat, the
	// open must not wait for its writer.
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(abs, flag|syscall.O_NONBLOCK, 0)
	if err != nil && !readOnly && isNotWritable(err) {
		if r, rerr := os.Open(abs); rerr == nil {
			r.Close()
			return "", &FileError{Path: abs, Reason: "this process may not write the file (open it with Options.ReadOnly to read it)", Err: err, class: ErrReadOnly}
		}
	}
	if err != nil {
		return "", &FileError{Path: abs, Reason: "cannot open the file", Err: err, class: ErrCannotOpen}
	}
	fi, err = f.Stat()
	f.Close()
	if err != nil {
		return "", &FileError{Path: abs, Reason: "cannot look at the file", Err: err, class: ErrCannotOpen}
	}
	if err := regular(abs, fi); err != nil {
		return "", err
	}
	if !readOnly {
		// A file in WAL mode needs its -wal and -shm files beside it.
		if err := folderWritable(filepath.Dir(abs)); err != nil {
			return "", &FileError{Path: abs, Reason: "this process may not write its folder, where the -wal and -shm files go (open it with Options.ReadOnly to read it)", Err: err, class: ErrReadOnly}
		}
	}
	return abs, nil
}

// checkFolder reports a folder that cannot hold a new file: missing, or not
// a folder at all.
func checkFolder(abs string) error {
	dir := filepath.Dir(abs)
	fi, err := os.Stat(dir)
	if err != nil {
		return &FileError{Path: abs, Reason: "its folder cannot be used", Err: err, class: ErrCannotOpen}
	}
	if !fi.IsDir() {
		return &FileError{Path: abs, Reason: fmt.Sprintf("its folder %s is not a directory", dir),
			Err: &fs.PathError{Op: "stat", Path: dir, Err: syscall.ENOTDIR}, class: ErrCannotOpen}
	}
	return nil
}

// regular refuses anything but a regular file: SQLite would read a
// directory as an I/O error, and wait on a named pipe or read a device
// forever.
func regular(abs string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &FileError{Path: abs, Reason: fmt.Sprintf("not a regular file but %s", kind(fi.Mode())), class: ErrCannotOpen}
}

// kind names a file's type for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return fmt.Sprintf("a special file (mode %s)", m)
}

// isNotWritable reports an open for writing that the permissions or a
// read-only file system refused.
func isNotWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// readOnlyWriter checks that a file opened with [Options.ReadOnly] holds a
// store at this version's schema, which it may not migrate, and returns the
// writer that refuses every write, naming the file, and whether the file
// has the type index.
func readOnlyWriter(ctx context.Context, db *sql.DB, abs string) (*writer, bool, error) {
	st, err := readState(ctx, db)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, classify(abs, err)
	}
	if st.version < latest() {
		return nil, false, &FileError{Path: abs, Reason: fmt.Sprintf("the store is at schema version %d, not %d, and Options.ReadOnly may not migrate it: "+
			"open it once without ReadOnly", st.version, latest()), class: ErrReadOnly}
	}
	typeIndex, err := hasTypeIndex(ctx, db)
	if err != nil {
		return nil, false, classify(abs, err)
	}
	return refusingWriter(&FileError{Path: abs, Op: "write", Reason: "the store was opened with Options.ReadOnly", class: ErrReadOnly}),
		typeIndex, nil
}
