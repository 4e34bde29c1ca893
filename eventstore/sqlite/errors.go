package sqlite

import (
	"errors"
	"fmt"

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
)

// FileError reports a file that [Open] refuses, and why. It matches
// [ErrNotEventStore], or [eventstore.ErrCorrupt] when the file is a Cairn
// event store that SQLite cannot read.
type FileError struct {
	Path   string
	Reason string
	// Err is the underlying error, if any.
	Err     error
	corrupt bool
}

func (e *FileError) Error() string {
	msg := fmt.Sprintf("sqlite: open %s: %s", e.Path, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is match [ErrNotEventStore] or [eventstore.ErrCorrupt].
func (e *FileError) Is(target error) bool {
	if e.corrupt {
		return target == eventstore.ErrCorrupt
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
