package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// applicationID marks a SQLite file as a Cairn event store ("Crn1") in the
// database header, so that Open can tell its own files from other
// applications' before it changes anything.
const applicationID = 0x43726e31

// migration is one forward step of the schema. Steps are never edited once
// released: a change is a new step, so every file reaches the same schema
// whatever version created it.
type migration struct {
	note string
	sql  string
}

// migrations[i] takes the schema from version i to version i+1. Later
// features add their tables as new steps (the second holds snapshots,
// checkpoints, dead letters and leases; the third re-keys dead letters by
// stream; the fourth gives them generations and a position index, the
// fifth claims; the sixth narrows the command index; the seventh drops
// the type index, which Options.TypeIndex adds back); every table is
// prefixed cairn_ so that applications may keep their own tables
// (transactional projections) in the same file.
var migrations = []migration{
	{
		note: "events and their indexes",
		sql: `
CREATE TABLE cairn_events (
	position       INTEGER PRIMARY KEY, -- the rowid: dense and commit-ordered, since one writer appends at a time
	stream         TEXT    NOT NULL,
	version        INTEGER NOT NULL,
	id             BLOB    NOT NULL,    -- 16-byte UUID
	type           TEXT    NOT NULL,
	schema_version INTEGER NOT NULL,
	data           BLOB    NOT NULL,
	correlation_id TEXT,                -- NULL when empty
	causation_id   TEXT,
	command_id     TEXT,
	extra          TEXT,                -- JSON object of Metadata.Extra, NULL when empty
	recorded_at    INTEGER NOT NULL     -- Unix nanoseconds, UTC
) STRICT;
CREATE UNIQUE INDEX cairn_events_stream_version ON cairn_events (stream, version);
CREATE INDEX cairn_events_id ON cairn_events (id);
CREATE INDEX cairn_events_type ON cairn_events (type);
CREATE INDEX cairn_events_command ON cairn_events (stream, command_id) WHERE command_id IS NOT NULL;
`,
	},
	{
		note: "snapshots, checkpoints, dead letters and leases",
		sql: `
CREATE TABLE cairn_snapshots (
	stream         TEXT    PRIMARY KEY,
	version        INTEGER NOT NULL,
	type           TEXT    NOT NULL,
	schema_version INTEGER NOT NULL,
	data           BLOB    NOT NULL,
	recorded_at    INTEGER NOT NULL -- Unix nanoseconds, UTC
) STRICT;
CREATE TABLE cairn_checkpoints (
	name       TEXT    PRIMARY KEY,
	major      INTEGER NOT NULL, -- the uint64 bits of the position
	minor      INTEGER NOT NULL,
	fence      INTEGER NOT NULL,
	updated_at INTEGER NOT NULL  -- Unix nanoseconds, UTC
) STRICT;
CREATE TABLE cairn_dead_letters (
	consumer       TEXT    NOT NULL,
	event_id       BLOB    NOT NULL, -- 16-byte UUID
	part           INTEGER NOT NULL,
	id             TEXT    NOT NULL, -- ULID
	position       INTEGER NOT NULL, -- the event, in the columns of cairn_events
	minor          INTEGER NOT NULL, -- its position's minor half (uint64 bits): 0 for this store's events
	stream         TEXT    NOT NULL,
	version        INTEGER NOT NULL,
	type           TEXT    NOT NULL,
	schema_version INTEGER NOT NULL,
	data           BLOB    NOT NULL,
	correlation_id TEXT,
	causation_id   TEXT,
	command_id     TEXT,
	extra          TEXT,
	recorded_at    INTEGER NOT NULL,
	error          TEXT    NOT NULL,
	attempts       INTEGER NOT NULL,
	first_failure  INTEGER NOT NULL, -- Unix nanoseconds, UTC
	last_failure   INTEGER NOT NULL,
	PRIMARY KEY (consumer, event_id, part),
	UNIQUE (consumer, id)
) STRICT;
CREATE TABLE cairn_leases (
	name       TEXT    PRIMARY KEY,
	holder     TEXT    NOT NULL,
	fence      INTEGER NOT NULL, -- grows on every change of hands, never repeats
	expires_at INTEGER           -- Unix nanoseconds by the writing process's clock; NULL once released
) STRICT;
`,
	},
	{
		// Event IDs are unique per stream only: two events that share an
		// ID in two streams must be two dead letters. SQLite cannot change
		// a primary key in place, so the table is copied into one keyed by
		// (consumer, stream, event_id, part); no row can collide there,
		// since the old key was narrower.
		note: "dead letters keyed by stream as well as event ID",
		sql: `
CREATE TABLE cairn_dead_letters_v3 (
	consumer       TEXT    NOT NULL,
	event_id       BLOB    NOT NULL, -- 16-byte UUID
	part           INTEGER NOT NULL,
	id             TEXT    NOT NULL, -- ULID
	position       INTEGER NOT NULL, -- the event, in the columns of cairn_events
	minor          INTEGER NOT NULL, -- its position's minor half (uint64 bits): 0 for this store's events
	stream         TEXT    NOT NULL,
	version        INTEGER NOT NULL,
	type           TEXT    NOT NULL,
	schema_version INTEGER NOT NULL,
	data           BLOB    NOT NULL,
	correlation_id TEXT,
	causation_id   TEXT,
	command_id     TEXT,
	extra          TEXT,
	recorded_at    INTEGER NOT NULL,
	error          TEXT    NOT NULL,
	attempts       INTEGER NOT NULL,
	first_failure  INTEGER NOT NULL, -- Unix nanoseconds, UTC
	last_failure   INTEGER NOT NULL,
	PRIMARY KEY (consumer, stream, event_id, part),
	UNIQUE (consumer, id)
) STRICT;
INSERT INTO cairn_dead_letters_v3 SELECT consumer, event_id, part, id, position, minor, stream, version, type,
	schema_version, data, correlation_id, causation_id, command_id, extra, recorded_at, error, attempts,
	first_failure, last_failure FROM cairn_dead_letters;
DROP TABLE cairn_dead_letters;
ALTER TABLE cairn_dead_letters_v3 RENAME TO cairn_dead_letters;
`,
	},
	{
		// A dead letter's generation makes the park that records a failed
		// retry a compare-and-set on the state the retry read; the index
		// serves a consumer that asks for the dead letters of the events
		// it is to handle again, by position, instead of reading them all.
		// Every dead letter already stored is at its first generation.
		note: "dead letter generations, and dead letters by position",
		sql: `
ALTER TABLE cairn_dead_letters ADD COLUMN generation INTEGER NOT NULL DEFAULT 1;
CREATE INDEX cairn_dead_letters_position ON cairn_dead_letters (consumer, position);
`,
	},
	{
		// A retry claims the dead letter it runs on until a time (Unix
		// nanoseconds, 0 for none), so that a second retry of it is
		// refused while the first runs. No stored dead letter is claimed.
		note: "dead letter claims",
		sql: `
ALTER TABLE cairn_dead_letters ADD COLUMN claimed_until INTEGER NOT NULL DEFAULT 0;
`,
	},
	{
		// derived_id is 1 for the events of an append that
		// storekit.CommandIDsDerived recognizes, as every append of the
		// command bus is: CommandResult finds such a command by its first
		// event's ID, on cairn_events_id, so the command index keeps only
		// the other events that carry a command ID. That spares every
		// command an index entry (a page written at a random place in the
		// file). Events stored before are 0, as if not recognized: the
		// rebuilt index holds what the old one held.
		note: "command index without the command bus's events",
		sql: `
ALTER TABLE cairn_events ADD COLUMN derived_id INTEGER NOT NULL DEFAULT 0;
DROP INDEX cairn_events_command;
CREATE INDEX cairn_events_command ON cairn_events (stream, command_id) WHERE command_id IS NOT NULL AND derived_id = 0;
`,
	},
	{
		// The type index cost every append an entry (a page more in the
		// write-ahead log at each commit: 15% of a save at SyncNormal)
		// for the sake of reads filtered by type, which scan the log
		// instead, as PostgreSQL's do. Options.TypeIndex builds it again
		// for files whose filtered catch-ups must skip a long log.
		note: "events without a type index",
		sql: `
DROP INDEX IF EXISTS cairn_events_type;
`,
	},
}

// SchemaVersion is the schema version this package writes and reads: the
// number of migrations.
const SchemaVersion = 7

// typeIndexName is the index that [Options.TypeIndex] keeps: (type,
// position), since every index of a rowid table ends in the rowid.
const (
	typeIndexName   = "cairn_events_type"
	createTypeIndex = "CREATE INDEX IF NOT EXISTS " + typeIndexName + " ON cairn_events (type)"
)

// hasTypeIndex reports whether the file holds the type index.
func hasTypeIndex(ctx context.Context, q querier) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?", typeIndexName).Scan(&n)
	return n > 0, err
}

// latest is the schema version that migrate reaches; tests add steps.
func latest() int { return len(migrations) }

// schemaTable records every migration applied to the file.
const schemaTable = `
CREATE TABLE IF NOT EXISTS cairn_schema (
	version    INTEGER PRIMARY KEY,
	note       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL -- Unix milliseconds
) STRICT`

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// inspect decides, without changing the file, whether Open may use it: it
// returns nil for a missing or empty file, or a Cairn event store this
// version can migrate, and a typed error otherwise.
func inspect(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &FileError{Path: path, Reason: "cannot read the file", Err: err, corrupt: true}
	}
	header := make([]byte, 100)
	n, err := io.ReadFull(f, header)
	f.Close()
	switch {
	case n == 0:
		// An empty file is a new database, or one whose pages are all
		// still in the write-ahead log: SQLite must look.
	case err != nil || !bytes.Equal(header[:len(sqliteMagic)], sqliteMagic):
		return &FileError{Path: path, Reason: "not a SQLite database"}
	default:
		if id := binary.BigEndian.Uint32(header[68:72]); id != 0 && id != applicationID {
			return &FileError{Path: path, Reason: fmt.Sprintf("a SQLite database of another application (application_id %#x)", id)}
		}
	}

	// Even a read-only connection creates the -wal and -shm files of a
	// WAL-mode database. Without a -wal file there is nothing but the main
	// file to read, so "immutable" reads it with no side files and no
	// locks. Another process may be creating the file meanwhile (it puts
	// the file in WAL mode after the Stat below, and checkpoints into it
	// when it closes): a read without locks that sees it change says
	// nothing, and is done again.
	for attempt := 1; ; attempt++ {
		before := statFiles(path)
		immutable := before.walSize == 0
		err := look(ctx, path, immutable)
		if err == nil || !immutable || attempt == 3 || statFiles(path) == before {
			return err
		}
	}
}

// fileStat is what the file system says of a store's file and its -wal
// file (size 0 when it has none).
type fileStat struct {
	size, walSize int64
	mod, walMod   int64 // modification times, ns
}

func statFiles(path string) fileStat {
	var st fileStat
	if fi, err := os.Stat(path); err == nil {
		st.size, st.mod = fi.Size(), fi.ModTime().UnixNano()
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		st.walSize, st.walMod = fi.Size(), fi.ModTime().UnixNano()
	}
	return st
}

// look reads what the file at path says about itself, in one read
// transaction (the application ID and the objects as one snapshot, not
// before and after another process's migration), and returns why Open must
// refuse it, or nil.
func look(ctx context.Context, path string, immutable bool) error {
	params := []string{"mode=ro", "_pragma=busy_timeout(5000)"}
	if immutable {
		params = append(params, "immutable=1")
	}
	db, err := sql.Open("sqlite", fileURI(path, params...))
	if err != nil {
		return &FileError{Path: path, Reason: "cannot open read-only to inspect it", Err: err, corrupt: true}
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(path, err)
	}
	defer func() { _ = tx.Rollback() }() // it only read
	st, err := readState(ctx, tx)
	if err != nil {
		return classify(path, err)
	}
	return st.check(path)
}

// schemaState is what a file says about itself.
type schemaState struct {
	appID   int64
	objects []string // names of the tables, indexes, views and triggers
	version int      // highest applied migration, when appID is ours
}

// querier is a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readState(ctx context.Context, q querier) (schemaState, error) {
	var st schemaState
	if err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&st.appID); err != nil {
		return st, err
	}
	rows, err := q.QueryContext(ctx, "SELECT name FROM sqlite_schema ORDER BY name")
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return st, err
		}
		st.objects = append(st.objects, name)
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if st.appID == applicationID && st.has("cairn_schema") {
		var v sql.NullInt64
		if err := q.QueryRowContext(ctx, "SELECT max(version) FROM cairn_schema").Scan(&v); err != nil {
			return st, err
		}
		st.version = int(v.Int64)
	}
	return st, nil
}

func (st schemaState) has(name string) bool {
	for _, o := range st.objects {
		if o == name {
			return true
		}
	}
	return false
}

// fresh reports a database that nothing has written to: Open may make it a
// Cairn event store.
func (st schemaState) fresh() bool { return st.appID == 0 && len(st.objects) == 0 }

// check returns why Open must refuse a file in this state, or nil.
func (st schemaState) check(path string) error {
	switch {
	case st.fresh():
		return nil
	case st.appID != applicationID:
		shown := st.objects
		if len(shown) > 5 {
			shown = append(shown[:5:5], "...")
		}
		return &FileError{Path: path, Reason: fmt.Sprintf(
			"a SQLite database of another application (application_id %#x, objects: %s)",
			st.appID, strings.Join(shown, ", "))}
	case !st.has("cairn_schema"):
		return &FileError{Path: path, Reason: "marked as a Cairn event store but has no cairn_schema table", corrupt: true}
	case st.version > latest():
		return &SchemaVersionError{Path: path, Found: st.version, Supported: latest()}
	}
	return nil
}

// migrate brings the file to the latest schema version in one IMMEDIATE transaction,
// so that two processes opening a new file at once cannot both create it
// and a crash leaves the file at the old version, never between.
// With typeIndex it also builds the type index ([Options.TypeIndex]) when
// the file lacks it.
func migrate(ctx context.Context, conn *sql.Conn, path string, typeIndex bool) (err error) {
	// Errors other than a refusal are classified by the caller.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	// Another process may have changed the file since inspect looked.
	st, err := readState(ctx, conn)
	if err != nil {
		return err
	}
	if err := st.check(path); err != nil {
		return err
	}
	if st.version == latest() && (!typeIndex || st.has(typeIndexName)) {
		_, err = conn.ExecContext(ctx, "COMMIT")
		return err
	}
	if st.fresh() {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, schemaTable); err != nil {
			return err
		}
	}
	now := time.Now().UnixMilli()
	for v := st.version; v < latest(); v++ {
		m := migrations[v]
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration to schema version %d (%s): %w", v+1, m.note, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO cairn_schema (version, note, applied_at) VALUES (?, ?, ?)",
			v+1, m.note, now); err != nil {
			return err
		}
	}
	if typeIndex {
		if _, err := conn.ExecContext(ctx, createTypeIndex); err != nil {
			return fmt.Errorf("building the type index: %w", err)
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
