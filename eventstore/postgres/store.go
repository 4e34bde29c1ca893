// Package postgres is an [eventstore.Store] on PostgreSQL (13 or newer),
// through pgx and pgxpool, for services that share a database server.
//
// Every store lives in a schema of its own (see [Options.Schema]), which it
// creates and migrates forward when it opens, so several services can share
// one database.
//
// Global order never skips a committed event. An event's [eventstore.Position]
// is (ID of the writing transaction, sequence within the log), and readers
// take only events whose transaction ID is below the oldest transaction
// still running in the cluster. A transaction that commits late therefore
// cannot land behind a subscriber's checkpoint; the price is that a
// long-running writing transaction anywhere in the cluster delays
// subscribers (lag, never loss). [Store.Lag] measures that delay. The
// package documentation in docs/postgres.md explains the design.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/redact"
)

// DefaultSchema is the schema a store uses when [Options.Schema] is empty.
const DefaultSchema = "cairn"

// DefaultPollInterval is how often a subscriber reads without having been
// woken, when [Options.PollInterval] is zero. NOTIFY wakes subscribers of
// this store's own appends at once; polling catches the rest (appends made
// with [Store.AppendTx], a transaction that held the read horizon back, a
// notification lost with a dropped connection).
const DefaultPollInterval = 250 * time.Millisecond

// Options configures a [Store]. The zero value is ready to use.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables;
	// empty means [DefaultSchema]. Stores in different schemas are
	// independent, so several services can share a database. A name is up
	// to 40 bytes of UTF-8 without control characters or white space at
	// either end, and neither starts with pg_ nor is information_schema;
	// [Open] and [New] refuse any other with an
	// [*eventstore.InvalidArgumentError] before they reach the server.
	Schema string
	// PollInterval bounds how long a live subscriber waits between reads
	// when nothing wakes it; zero means [DefaultPollInterval].
	PollInterval time.Duration
	// PageSize is how many events a read fetches per query; zero means
	// [storekit.DefaultPageSize].
	PageSize int
	// Logger receives the store's warnings (a dropped LISTEN connection, a
	// subscription read retried); nil means slog.Default().
	Logger *slog.Logger
	// Channel is the notification channel on which appends tell the
	// subscribers of other processes to read; empty means "cairn_events_"
	// and the schema. Every store of one schema must use the same. Any
	// login of the database may send on a channel, so a notification is
	// only a hint to read (see WakeInterval). A name is 1 to 63 bytes of
	// UTF-8 without NUL bytes (PostgreSQL's limit on identifiers); [Open]
	// and [New] refuse any other with an [*eventstore.InvalidArgumentError].
	Channel string
	// AlwaysNotify sends the NOTIFY for other processes' subscribers
	// after appends (at most one per 5 ms) whether or not another store's
	// listener is connected. Without it a store sends it only while one is
	// (docs/postgres.md, "Subscriptions"), which it tells by the name its
	// LISTEN connection gives itself. Set it when something else listens
	// on Channel: a program of your own, or the stores of an earlier
	// release during a rolling upgrade (which poll meanwhile), or when a
	// proxy between the stores and the server replaces the
	// application_name of connections.
	AlwaysNotify bool
	// WakeInterval is the least time between two wake-ups of this store's
	// subscribers by notifications: the first wakes them at once, and the
	// ones that arrive within the interval after it share one wake-up at
	// its end, so a flood of notifications (appends of other processes,
	// or a login sending them) makes each subscriber read at most once
	// per interval. Zero means [DefaultWakeInterval].
	WakeInterval time.Duration
	// ReadOnly opens an existing store only to read it, as a look from
	// outside does (the cairn command line): Open neither creates nor
	// migrates the schema, refuses one that is not at this version's
	// [SchemaVersion], and runs every transaction read-only
	// (default_transaction_read_only), so that any write fails in the
	// server. [New] on a pool of the caller's leaves the pool's settings
	// as they are, and only skips the migration.
	ReadOnly bool
}

// DefaultWakeInterval is the [Options.WakeInterval] of a zero Options: at
// most 50 reads a second per subscriber from notifications, for at most
// 20 ms of extra delay under a steady stream of other processes' appends.
const DefaultWakeInterval = 20 * time.Millisecond

// channel returns the notification channel the options ask for, or an
// error naming what is wrong with it.
func (o Options) channel(schema string) (string, error) {
	if o.Channel == "" {
		return "cairn_events_" + schema, nil
	}
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Index: -1, Field: "channel", Reason: reason}
	}
	switch {
	case len(o.Channel) > 63:
		return "", bad(fmt.Sprintf("is %d bytes, more than PostgreSQL's 63 for an identifier", len(o.Channel)))
	case !utf8.ValidString(o.Channel) || strings.ContainsRune(o.Channel, 0):
		return "", bad("is not valid UTF-8 without NUL bytes")
	}
	return o.Channel, nil
}

// schema returns the schema name the options ask for.
func (o Options) schema() string {
	if o.Schema == "" {
		return DefaultSchema
	}
	return o.Schema
}

// Store is a PostgreSQL event store. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	sql      statements
	channel  string
	wakeGap  time.Duration // Options.WakeInterval
	poll     time.Duration
	pageSize int
	// pageOfStream is s.streamPage, made once: a method value passed to
	// ReadStreamPagesInto, which keeps it, is an allocation per read.
	pageOfStream storekit.StreamPageAppender
	logger       *slog.Logger
	closed       atomic.Bool
	done         chan struct{}
	closeOnce    sync.Once
	workers      sync.WaitGroup

	changes   storekit.Notifier // wakes this process's subscribers
	notify    chan struct{}     // asks the notify worker to tell other processes
	groups    chan *groupAppend // hands single-event appends to the group workers
	appending atomic.Int32      // single-event Appends under way
	lifecycle sync.Mutex        // orders starting the listener against Close
	listening bool
	stop      context.CancelFunc // ends the workers
	workerCtx context.Context

	// listenerName names the store's LISTEN connection, and presence is
	// whether other stores listen, as the notify worker last found, at
	// most listenerCheck ago; quietUntil is when a finding that nobody
	// listens expires, as a time since started (listeners.go).
	listenerName  string
	presence      listenerPresence
	listenerCheck time.Duration
	alwaysNotify  bool
	started       time.Time
	quietUntil    atomic.Int64
}

var _ eventstore.Store = (*Store)(nil)

// Open connects to the database at connString (a URL or DSN as pgx
// accepts), creates or migrates the store's schema and returns the store.
// The store owns the pool it makes: [Store.Close] closes it. A string that
// does not parse is an [*eventstore.InvalidArgumentError]; no error of Open
// quotes a password of connString.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSchemaName(opts.schema()); err != nil {
		return nil, err
	}
	pool, err := newPool(ctx, connString, opts.ReadOnly)
	if err != nil {
		// pgx's parse error may quote the string as given, password and
		// all: it is not kept in the chain, only its masked text.
		return nil, &eventstore.InvalidArgumentError{Index: -1, Field: "connection string",
			Reason: redact.Text(err.Error(), connString)}
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, redact.Error(err, connString)
	}
	s.ownsPool = true
	return s, nil
}

// New returns a store on an existing pool, after creating or migrating its
// schema. The caller keeps the pool: [Store.Close] leaves it open. The store
// also opens one connection of its own, outside the pool, for LISTEN, when
// its first subscription starts.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	schema := opts.schema()
	if err := checkSchemaName(schema); err != nil {
		return nil, err
	}
	channel, err := opts.channel(schema)
	if err != nil {
		return nil, err
	}
	prepare := migrate
	if opts.ReadOnly {
		prepare = checkSchemaVersion
	}
	if err := prepare(ctx, pool, schema); err != nil {
		return nil, err
	}
	if err := checkTransactionIDs(ctx, pool, schema); err != nil {
		return nil, err
	}
	s := &Store{
		pool:     pool,
		schema:   schema,
		sql:      newStatements(schema),
		channel:  channel,
		wakeGap:  opts.WakeInterval,
		poll:     opts.PollInterval,
		pageSize: opts.PageSize,
		logger:   opts.Logger,
		done:     make(chan struct{}),
		notify:   make(chan struct{}, 1),
		groups:   make(chan *groupAppend), // unbuffered: see groupAppendOne
	}
	if s.poll <= 0 {
		s.poll = DefaultPollInterval
	}
	if s.wakeGap <= 0 {
		s.wakeGap = DefaultWakeInterval
	}
	if s.pageSize <= 0 {
		s.pageSize = storekit.DefaultPageSize
	}
	s.pageOfStream = s.streamPage
	s.listenerName, s.listenerCheck = newListenerName(channel), listenerCheckEvery
	s.alwaysNotify, s.started = opts.AlwaysNotify, time.Now()
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.workerCtx, s.stop = context.WithCancel(context.Background())
	s.workers.Add(1)
	go s.notifyWorker()
	s.workers.Add(groupWorkers)
	for range groupWorkers {
		go s.groupWorker()
	}
	return s, nil
}

// Channel returns the notification channel of the store's appends (see
// [Options.Channel]).
func (s *Store) Channel() string { return s.channel }

// Schema returns the PostgreSQL schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Pool returns the pool the store uses, for transactions that call
// [Store.AppendTx].
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the store's subscriptions (they end with
// [eventstore.ErrClosed]) and its background connections, and closes the
// pool if [Open] made it. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.lifecycle.Lock()
		s.closed.Store(true)
		s.lifecycle.Unlock()
		close(s.done)
		s.stop()
		s.workers.Wait()
		if s.ownsPool {
			s.pool.Close()
		}
	})
	return nil
}

// checkOpen returns [eventstore.ErrClosed] once the store is closed.
func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return eventstore.ErrClosed
	}
	return nil
}

// closedOr returns ErrClosed instead of err when the store was closed under
// a running call: the pool's own error would not match it.
func (s *Store) closedOr(err error) error {
	if s.closed.Load() && !errors.Is(err, eventstore.ErrClosed) {
		return fmt.Errorf("%w (%v)", eventstore.ErrClosed, err)
	}
	return err
}

// ErrForeignTransactionIDs matches the error of opening a store whose events
// carry transaction IDs that this cluster has not reached yet: they were
// restored from another cluster (pg_dump and restore; pg_upgrade and
// physical replicas keep transaction IDs and are fine). New events would get
// positions below the old ones, behind every subscriber's checkpoint, so
// the store refuses to open. Copy the events with an append per stream
// into a fresh schema instead.
var ErrForeignTransactionIDs = errors.New("postgres: events carry transaction IDs from another cluster")

// checkTransactionIDs makes sure that every event's transaction ID is below
// the cluster's next one, so that new events sort after all stored events.
// newPool opens a pool on connString; read-only, every transaction of its
// connections is.
func newPool(ctx context.Context, connString string, readOnly bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	if readOnly {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func checkTransactionIDs(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var newest, next uint64
	err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce((SELECT tx_id FROM %s.events ORDER BY tx_id DESC LIMIT 1), '0'::xid8),
		pg_snapshot_xmax(pg_current_snapshot())`, pgx.Identifier{schema}.Sanitize())).Scan(&newest, &next)
	if err != nil {
		return fmt.Errorf("postgres: checking schema %q: %w", schema, err)
	}
	if newest >= next {
		return fmt.Errorf("%w: schema %q holds events of transaction %d, but this cluster's next transaction is %d",
			ErrForeignTransactionIDs, schema, newest, next)
	}
	return nil
}
