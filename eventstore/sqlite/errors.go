package sqlite

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

var (
	// ErrNotEventStore matches a [*FileError] for a file that is not a Cairn
	// event store: random bytes, or a SQLite database of another
	// application. Open leaves such a file untouched.
	ErrNotEventStore = errors.New("sqlite: file is not a Cairn event store")
	// ErrNewerSchema matches a [*SchemaVersionError]: the file was written
	// by a newer version of Cairn, whose schema this version cannot read.
	ErrNewerSchema = errors.New("sqlite: file has a newer schema")
	// ErrCannotOpen matches a [*FileError] for a path that cannot hold an
	// event store: no path, a folder that is missing or not a folder, a
	// directory, a named pipe or device, or a file this process may not
	// read or create. When the operating system said why, the error also
	// wraps its error, so errors.Is(err, fs.ErrNotExist) and
	// errors.Is(err, fs.ErrPermission) tell those apart.
	ErrCannotOpen = errors.New("sqlite: cannot open the file")
	// ErrReadOnly matches a [*FileError] for a write the file cannot take:
	// [Open] of a file, or in a folder, that this process may not write (or
	// on a read-only file system), and every write of a store opened with
	// [Options.ReadOnly].
	ErrReadOnly = errors.New("sqlite: file is read-only")
	// ErrBusy matches a [*FileError] for an operation that waited
	// [Options.BusyTimeout] for a lock that another connection (another
	// process, or another store on the same file) held all that time,
	// typically a long write transaction: nothing was written, and the
	// operation may be tried again. Such an error also matches
	// [eventstore.ErrUnavailable].
	ErrBusy = errors.New("sqlite: file is locked by another connection")
	// ErrIO matches a [*FileError] for a read or write that the file system
	// failed: the disk is full, the file reached the process's size limit,
	// or the operating system reported an I/O error. SQLite rolls back the
	// transaction it failed in, so nothing of it was written, unless what
	// failed was the sync of a commit already written to the log
	// (SQLITE_IOERR_FSYNC, which the error's Reason names): that commit may
	// be found after a restart, as an append whose reply a lost connection
	// took may have been stored. Either way the operation may be tried
	// again once the cause is cleared (an append with the same event IDs is
	// stored once). Such an error also matches [eventstore.ErrUnavailable].
	ErrIO = errors.New("sqlite: the file system failed a read or write")
)

// FileError reports a file that [Open] refuses, or that failed a read or a
// write later, and why. It matches one of [ErrNotEventStore],
// [ErrCannotOpen], [ErrReadOnly], [ErrBusy], [ErrIO], or [eventstore.ErrCorrupt]
// when the file is a Cairn event store that SQLite cannot read (a damaged
// page, found at Open or by any later read or write).
type FileError struct {
	Path string
	// Op is what failed, naming the stream or consumer where there is one
	// (`read stream "order-1"`); empty for Open.
	Op     string
	Reason string
	// Err is the underlying error, if any: SQLite's, or the operating
	// system's (a *fs.PathError).
	Err     error
	corrupt bool
	// class is the sentinel the error matches when it is not corrupt; nil
	// means ErrNotEventStore.
	class error
}

func (e *FileError) Error() string {
	msg := fmt.Sprintf("sqlite: open %s: %s", e.Path, e.Reason)
	if e.Op != "" {
		msg = fmt.Sprintf("sqlite: %s: %s: %s", e.Path, e.Op, e.Reason)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is match the error's class: [ErrNotEventStore],
// [ErrCannotOpen], [ErrReadOnly], [ErrBusy], [ErrIO] or
// [eventstore.ErrCorrupt].
func (e *FileError) Is(target error) bool {
	switch {
	case e.corrupt:
		return target == eventstore.ErrCorrupt
	case e.class == ErrBusy || e.class == ErrIO:
		return target == e.class || target == eventstore.ErrUnavailable
	case e.class != nil:
		return target == e.class
	}
	return target == ErrNotEventStore
}

func (e *FileError) Unwrap() error { return e.Err }

// SchemaVersionError reports a file whose schema is newer than this version
// of Cairn knows. Migrations only go forward, so the file must be opened by
// the newer version. It matches [ErrNewerSchema].
type SchemaVersionError struct {
	Path string
	// Found is the file's schema version; Supported is the newest this
	// version of the package knows.
	Found, Supported int
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("sqlite: open %s: schema version %d is newer than %d, the newest this version of Cairn knows: "+
		"open it with the version of Cairn that wrote it, or a later one", e.Path, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrNewerSchema) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrNewerSchema }

// CorruptError reports a stored event that cannot be decoded: a row this
// package did not write, or a damaged file. It matches
// [eventstore.ErrCorrupt].
type CorruptError struct {
	Stream   string
	Version  uint64
	Position uint64
	// Field names the undecodable column.
	Field  string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("sqlite: stored event at position %d (stream %q, version %d) is corrupt: %s %s",
		e.Position, e.Stream, e.Version, e.Field, e.Reason)
}

// Is makes errors.Is(err, eventstore.ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == eventstore.ErrCorrupt }

// resultCode returns SQLite's extended result code in err, from either
// driver (database/sql's or SQLite's own API); SQLITE_ERROR when err is
// not SQLite's. Its low byte is the primary code.
func resultCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return int(zs.ErrCode(err))
}

// fileErr is the one place where SQLite's errors about the file itself
// become a [*FileError] naming the file and op (empty for Open): a damaged
// file, a file that is not a database, one that cannot be written or
// opened, one locked by another connection past the busy timeout, one the
// file system failed to read or write. SQLite's own messages for these
// ("database disk image is malformed", "database is locked", "disk I/O
// error") name neither. It returns nil for any other
// error, which the caller reports as it is.
func fileErr(path, op string, err error) *FileError {
	code := resultCode(err)
	switch code & 0xff {
	case sqlite3.SQLITE_CORRUPT:
		return &FileError{Path: path, Op: op, Reason: "the database is damaged", Err: err, corrupt: true}
	case sqlite3.SQLITE_NOTADB:
		if op == "" {
			return &FileError{Path: path, Reason: "not a SQLite database", Err: err}
		}
		// It was one when the store opened it: it has been overwritten.
		return &FileError{Path: path, Op: op, Reason: "the file is no longer a SQLite database", Err: err, corrupt: true}
	case sqlite3.SQLITE_READONLY:
		if code == sqlite3.SQLITE_READONLY_CANTINIT || code == sqlite3.SQLITE_READONLY_DIRECTORY {
			// Even a reader of a file in WAL mode needs its -shm file,
			// which no writer left there and this process may not create.
			return &FileError{Path: path, Op: op, Reason: "SQLite cannot read the file without its -shm file, " +
				"which is missing and which this process may not create in the file's folder", Err: err, class: ErrCannotOpen}
		}
		return &FileError{Path: path, Op: op, Reason: "the file cannot be written", Err: err, class: ErrReadOnly}
	case sqlite3.SQLITE_CANTOPEN:
		return &FileError{Path: path, Op: op, Reason: "SQLite cannot open the file or its -wal and -shm files", Err: err, class: ErrCannotOpen}
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return &FileError{Path: path, Op: op, Reason: "another connection held the file's lock for longer than the busy timeout", Err: err, class: ErrBusy}
	case sqlite3.SQLITE_FULL:
		return &FileError{Path: path, Op: op, Reason: "the disk is full, or the file reached a size limit", Err: err, class: ErrIO}
	case sqlite3.SQLITE_IOERR:
		if code == sqlite3.SQLITE_IOERR_FSYNC || code == sqlite3.SQLITE_IOERR_DIR_FSYNC {
			return &FileError{Path: path, Op: op, Reason: "the operating system failed to sync the file: " +
				"what was being committed may or may not be found after a restart", Err: err, class: ErrIO}
		}
		return &FileError{Path: path, Op: op, Reason: "the operating system failed a read or write of the file or its -wal and -shm files", Err: err, class: ErrIO}
	}
	return nil
}

// fileFailure returns err as a [*FileError] naming the store's file and op
// when SQLite blamed the file (see fileErr), and otherwise unchanged. Every
// read and write of a Store reports through it.
func (s *Store) fileFailure(op string, err error) error {
	var fe *FileError
	if err == nil || errors.As(err, &fe) {
		return err
	}
	if fe := fileErr(s.path, op, err); fe != nil {
		return fe
	}
	return err
}

// classify turns an error from inspecting or migrating a file into a typed
// error when SQLite says what is wrong with the file.
func classify(path string, err error) error {
	if fe := fileErr(path, "", err); fe != nil {
		return fe
	}
	return fmt.Errorf("sqlite: open %s: %w", path, err)
}
