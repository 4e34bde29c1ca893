package kurrentdb

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Defaults of [Options].
const (
	// DefaultCallTimeout bounds one call to the server.
	DefaultCallTimeout = 10 * time.Second
	// DefaultRepeatStreams is how many streams' event IDs a store
	// remembers for its repeat checks.
	DefaultRepeatStreams = 4096
	// DefaultPollInterval is how often a subscriber reads again while the
	// store's live subscription to the server is down.
	DefaultPollInterval = time.Second
)

// Options configure a [Store]. The zero value suits most services.
type Options struct {
	// CallTimeout bounds each call to the server: an append, one page of a
	// read. Zero or less means [DefaultCallTimeout].
	CallTimeout time.Duration
	// RepeatStreams is how many streams' event IDs the store remembers, so
	// that the repeat check of an append reads only the events appended
	// since it last looked (see docs/kurrentdb.md). Zero or less means
	// [DefaultRepeatStreams].
	RepeatStreams int
	// PollInterval is how often subscribers read again while the store's
	// live subscription to the server is down. Zero or less means
	// [DefaultPollInterval].
	PollInterval time.Duration
	// Logger receives the client's and the store's diagnostics; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.RepeatStreams <= 0 {
		o.RepeatStreams = DefaultRepeatStreams
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store is an [eventstore.Store] on a KurrentDB server or cluster. It is
// safe for concurrent use; Close it when done.
type Store struct {
	opts    Options
	cfg     *esdb.Configuration
	log     *slog.Logger
	repeats *repeatCache
	changes storekit.Notifier
	state   stateCaches // of the consumer-state streams (statestream.go)

	// closing is cancelled by Close, which ends every call in flight.
	closing context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	live    sync.WaitGroup

	mu     sync.Mutex
	conn   *conn
	closed bool
}

// Open connects to the KurrentDB server or cluster that connString names:
// esdb://, esdb+discover://, kurrentdb:// or kurrentdb+discover://, with the
// client's options for TLS, credentials and node preference (see
// docs/kurrentdb.md). It checks the string, not the server: the first call
// dials. Close the store when done.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ParseConnString(connString)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cfg.Logger = clientLogger(opts.Logger)
	// The client gives up looking for a node after a number of attempts,
	// and then strands the calls waiting for it, for good (see conn): it
	// must never give up.
	cfg.MaxDiscoverAttempts = math.MaxInt32
	cli, err := esdb.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb: %w", err)
	}
	s := &Store{
		opts:    opts,
		cfg:     cfg,
		log:     opts.Logger,
		repeats: newRepeatCache(opts.RepeatStreams),
		done:    make(chan struct{}),
		conn:    &conn{cli: cli},
	}
	s.closing, s.cancel = context.WithCancel(context.Background())
	s.live.Add(1)
	go s.watch()
	return s, nil
}

// ParseConnString parses a KurrentDB connection string as [Open] takes it.
// The client knows only the esdb schemes, so kurrentdb:// and
// kurrentdb+discover:// are read as their esdb equivalents.
func ParseConnString(connString string) (*esdb.Configuration, error) {
	s := connString
	for _, scheme := range []string{"kurrentdb://", "kurrentdb+discover://"} {
		if len(s) >= len(scheme) && strings.EqualFold(s[:len(scheme)], scheme) {
			s = "esdb" + s[len("kurrentdb"):]
		}
	}
	cfg, err := esdb.ParseConnectionString(s)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb: connection string: %w", err)
	}
	return cfg, nil
}

// clientLogger passes the client's diagnostics to log, at debug level:
// they are mostly failures that the store handles and reports itself, and
// while no node answers the client logs every attempt to find one.
func clientLogger(log *slog.Logger) esdb.LoggingFunc {
	return func(_ esdb.LogLevel, format string, args ...any) {
		if log.Enabled(context.Background(), slog.LevelDebug) {
			log.Debug("kurrentdb client: " + fmt.Sprintf(format, args...))
		}
	}
}

// Close ends every call in flight, closes the client and makes every later
// call fail with [eventstore.ErrClosed]. It is idempotent. A call stuck in
// the client (see call) keeps the client open: it is left behind, as
// closing it would crash that call.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.conn
	s.mu.Unlock()
	s.cancel()
	close(s.done)
	return s.closeConn(c)
}

// isClosed reports whether Close was called. Close cancels closing before
// it closes done, and a call that closing ended must find the store closed
// already, or it would report the cancellation as its own failure.
func (s *Store) isClosed() bool {
	return s.closing.Err() != nil
}

var _ storekit.Described = (*Store)(nil)

// Kind implements [storekit.Described]. KurrentDB has no schema of
// Cairn's: the store's state streams are streams like any other, which
// nothing migrates, so the version is 0.
func (s *Store) Kind() (string, int) { return "kurrentdb", 0 }
