// Package sqlite is the embedded [eventstore.Store]: one SQLite file, no
// server, no cgo (it runs on modernc.org/sqlite).
//
// The file is in WAL mode. One writer makes every append, inside BEGIN
// IMMEDIATE transactions, so global positions are dense and in commit
// order; concurrent appends are gathered into one transaction and one fsync
// (group commit), each checked on its own, so one append's conflict fails
// only that append. Readers use pools of their own and never wait for the
// writer. Subscribers in the same process wake on commit; commits by other
// processes on the same file are seen by polling.
//
// By default a successful append is durable: it survives power loss
// (synchronous=FULL). See [Options.Synchronous] for the faster setting and
// its risk.
//
// The same file keeps what aggregates and consumers need: snapshots,
// checkpoints, dead letters and leases, written by the same writer. A
// projection whose read model lives in the file runs its batches in
// transactions of that writer ([Store.InTx]), so the read model and the
// checkpoint commit together.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
)

// Synchronous says when SQLite makes a commit durable.
type Synchronous int

const (
	// SyncFull, the default, syncs the write-ahead log at every commit: an
	// acknowledged append survives a process crash, an OS crash and power
	// loss.
	SyncFull Synchronous = iota
	// SyncNormal syncs only at checkpoints. It is faster, and an
	// acknowledged append still survives a crash of the process, but an OS
	// crash or power loss can lose the last appends acknowledged before it
	// (never corrupt the file, never keep part of an append).
	SyncNormal
)

func (s Synchronous) pragma() string {
	if s == SyncNormal {
		return "NORMAL"
	}
	return "FULL"
}

// Options configure a [Store]. The zero value is the durable default.
type Options struct {
	// Synchronous trades durability against power loss for speed; the zero
	// value is [SyncFull].
	Synchronous Synchronous
	// BusyTimeout is how long a connection waits for a lock held by another
	// process on the same file (its writer, or a checkpoint) before it
	// fails. Zero means 5 seconds.
	BusyTimeout time.Duration
	// PollInterval is how often subscribers look for events appended by
	// other processes; commits by this store wake them at once. Zero or
	// less means [storekit.DefaultPollInterval] (it once meant no polling:
	// say NoPolling).
	PollInterval time.Duration
	// NoPolling turns that polling off, for a file no other process
	// writes to: subscribers then wake only on this store's commits.
	NoPolling bool
	// MaxReaders bounds each pool of read connections: the one that reads
	// events and the one that reads the consumer tables. Zero means 4.
	MaxReaders int
	// Logger receives what the store reports on its own (retried reads);
	// nil means slog.Default().
	Logger *slog.Logger
	// ReadOnly opens an existing store only to read it, for a file this
	// process may not write (a replica, a file on a read-only file
	// system). Open neither creates nor migrates the file, and refuses one
	// that is not at this version's schema; every write returns a
	// [*FileError] matching [ErrReadOnly]. Appends by other processes
	// reach subscribers within PollInterval.
	ReadOnly bool
	// FileMode is the permissions of a store file that Open creates, which
	// SQLite gives its -wal and -shm files too; zero means 0600: events
	// are read by the owner of the process only, whatever the umask lets
	// through. An existing file keeps its permissions.
	FileMode fs.FileMode
	// TypeIndex keeps an index of event types, so that a read filtered by
	// type reads only the events of its types: a catch-up on a rare type
	// skips the rest of a long log. Every append then writes an entry in
	// it too (a save at SyncNormal measured 15% slower). Without it, as on
	// PostgreSQL, a filtered read scans the log from its position and
	// checks each event's type, about 0.3 s per million events skipped
	// (docs/sqlite.md). Open builds the index when the file lacks it, in
	// one transaction that holds the write lock for as long as a large
	// file takes (Open's context does not cut it short; a failure rolls it
	// back whole); the index then stays, and every process that opens the
	// file uses it, until it is dropped (DROP INDEX cairn_events_type).
	// With ReadOnly it builds nothing.
	TypeIndex bool
}

// fileMode is the permissions of a new store file.
func (o Options) fileMode() fs.FileMode {
	if o.FileMode == 0 {
		return 0o600
	}
	return o.FileMode.Perm()
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = storekit.DefaultPollInterval
	}
	if o.MaxReaders <= 0 {
		o.MaxReaders = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store is an event store in one SQLite file. It is safe for concurrent
// use, and several processes may open the same file.
type Store struct {
	path    string
	opts    Options
	readers *sql.DB
	w       *writer
	events  *eventReaders
	// typeIndex says whether the file had the type index when it was
	// opened ([Options.TypeIndex]), which decides how filtered reads are
	// asked: an index built later by another process is used from the
	// next Open.
	typeIndex bool
	// pageOfStream is s.streamPage, made once: a method value passed to
	// ReadStreamPages, which keeps it, is an allocation per read.
	pageOfStream storekit.StreamPageAppender

	changes   storekit.Notifier
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ eventstore.Store = (*Store)(nil)

// Open opens the event store in the file at path, creating the file if it
// does not exist and migrating its schema forward if an older version of
// Cairn wrote it.
//
// Open changes nothing in a file it refuses: one that is not a SQLite
// database or belongs to another application ([ErrNotEventStore]), or one
// written by a newer version of Cairn ([ErrNewerSchema]). A path that
// cannot hold a store (no path, a missing folder, a directory, a named pipe
// or device, a file it may not read) fails with [ErrCannotOpen] before
// SQLite touches it; a file or folder it may not write fails with
// [ErrReadOnly] unless [Options.ReadOnly] is set. Every refusal is a
// [*FileError] naming the file. A context that is done when Open is called
// fails it with the context's error, creating nothing.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	abs, err := checkPath(path, opts.ReadOnly, opts.fileMode())
	if err != nil {
		return nil, err
	}
	if err := inspect(ctx, abs); err != nil {
		return nil, err
	}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", opts.BusyTimeout.Milliseconds())
	s := &Store{path: abs, opts: opts, done: make(chan struct{})}
	s.pageOfStream = s.streamPage
	s.readers, err = sql.Open("sqlite", fileURI(abs, busy, "mode=ro", "_pragma=query_only(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	s.readers.SetMaxOpenConns(opts.MaxReaders)
	s.readers.SetMaxIdleConns(opts.MaxReaders)
	if opts.ReadOnly {
		s.w, s.typeIndex, err = readOnlyWriter(ctx, s.readers, abs)
	} else {
		s.w, s.typeIndex, err = openWriter(ctx, abs, opts, busy, s.changes.Notify)
	}
	if err == nil {
		s.events, err = openEventReaders(abs, opts)
		if err != nil {
			s.w.close()
			err = fmt.Errorf("sqlite: open %s: %w", abs, err)
		}
	}
	if err != nil {
		s.readers.Close()
		return nil, err
	}
	return s, nil
}

// openWriter opens the writer's connections, puts the file in WAL mode and
// migrates its schema. It reports whether the file then has the type index.
func openWriter(ctx context.Context, abs string, opts Options, busy string, committed func()) (*writer, bool, error) {
	// journal_size_limit truncates the WAL after a checkpoint that a long
	// read let grow, instead of keeping the file at its largest forever.
	// wal_autocheckpoint leaves checkpoints to the checkpointer.
	// _txlock makes the transactions of InTx (database/sql's BeginTx) take
	// the write lock at once, as the writer's own do: a deferred one would
	// fail, not wait, if another process wrote after its first read.
	wdb, err := sql.Open("sqlite", fileURI(abs, busy,
		"_pragma=synchronous("+opts.Synchronous.pragma()+")", fmt.Sprintf("_pragma=journal_size_limit(%d)", journalSizeLimit),
		fmt.Sprintf("_pragma=wal_autocheckpoint(%d)", backstopFrames), "_txlock=immediate"))
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	wdb.SetConnMaxLifetime(0)
	conn, err := wdb.Conn(ctx)
	if err == nil {
		// The writer's connection lives on: see noInterrupt.
		err = whileBusy(ctx, opts.BusyTimeout, func() error { return enterWAL(noInterrupt, conn) })
	}
	if err == nil {
		err = migrate(noInterrupt, conn, abs, opts.TypeIndex)
	}
	var typeIndex bool
	if err == nil {
		// On the writer's connection: a reader's connection left open
		// would outlive the writer at Close, which then could not
		// checkpoint the log into the file.
		typeIndex, err = hasTypeIndex(noInterrupt, conn)
	}
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		wdb.Close()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		var fe *FileError
		var se *SchemaVersionError
		if errors.As(err, &fe) || errors.As(err, &se) {
			return nil, false, err
		}
		return nil, false, classify(abs, err)
	}
	appends, err := openAppendConn(abs, opts)
	if err != nil {
		conn.Close()
		wdb.Close()
		return nil, false, classify(abs, err)
	}
	checkpoints, err := openCheckpointer(abs, opts)
	if err != nil {
		appends.close()
		conn.Close()
		wdb.Close()
		return nil, false, classify(abs, err)
	}
	return newWriter(wdb, conn, appends, checkpoints, committed), typeIndex, nil
}

// journalSizeLimit is the size, in bytes, to which a checkpoint truncates
// the write-ahead log when a long read let it grow past it.
const journalSizeLimit = 64 << 20

// pageSize is the page size of new files, set explicitly so that it does
// not follow the library's default. Measured here, 1 KiB pages (fewer bytes
// synced per append) were no faster for appends and slower for reads.
const pageSize = 4096

// enterWAL puts the file in WAL mode, which the one-writer, many-readers
// model relies on (some file systems cannot hold it). A new file gets its
// page size first: it cannot change once the file is in WAL mode.
func enterWAL(ctx context.Context, conn *sql.Conn) error {
	var pages int
	if err := conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return err
	}
	if pages == 0 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", pageSize)); err != nil {
			return err
		}
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("the file cannot be put in WAL mode (journal_mode is %q)", mode)
	}
	return nil
}

// whileBusy runs fn again while it fails on a lock that another connection
// holds, for up to wait. SQLite puts a new file into WAL mode under an
// exclusive lock that it takes without its busy handler: a process that
// opens a new file while another one creates it would fail at once, where
// every other statement waits for Options.BusyTimeout.
func whileBusy(ctx context.Context, wait time.Duration, fn func() error) error {
	deadline := time.Now().Add(wait)
	for {
		err := fn()
		if err == nil || !isBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		if backoff.Wait(ctx, 5*time.Millisecond) != nil {
			return err
		}
	}
}

// fileURI returns a SQLite URI for the absolute path with query parameters.
func fileURI(abs string, params ...string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	s := u.String()
	for i, p := range params {
		if i == 0 {
			s += "?"
		} else {
			s += "&"
		}
		s += p
	}
	return s
}

// Path returns the absolute path of the store's file.
func (s *Store) Path() string { return s.path }

// Subscribe implements [eventstore.Store.Subscribe]. Appends through this
// store wake subscribers at once; appends by other processes are seen
// within [Options.PollInterval].
func (s *Store) Subscribe(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	poll := s.opts.PollInterval
	if s.opts.NoPolling {
		poll = 0 // with Changed set, Follow then waits for commits alone
	}
	return storekit.Follow(ctx, after, filter, s.readPage, storekit.FollowOptions{
		Changed:      s.changes.Changed,
		PollInterval: poll,
		Closed:       s.done,
		Transient:    isBusy,
		Logger:       s.opts.Logger,
	})
}

// ReadAll implements [eventstore.Store.ReadAll].
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadPages(ctx, after, filter, s.readPage, 0)
}

// Close implements [eventstore.Store.Close]. Appends still waiting for the
// writer fail with [eventstore.ErrClosed]; those it has taken complete
// first. Subscriptions end with [eventstore.ErrClosed]. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		werr := s.w.close()
		s.closeErr = errors.Join(werr, s.events.close(), s.readers.Close())
	})
	return s.closeErr
}

func (s *Store) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
