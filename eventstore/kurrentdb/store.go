package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
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

// conn is one client and the calls using it, so that a client is closed
// only once no call uses it: the client panics when it is closed under a
// call.
type conn struct {
	cli   *esdb.Client
	users sync.WaitGroup
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

// clientLogger passes the client's diagnostics to log: its errors are
// mostly ones the store handles and reports itself, so they are debug.
func clientLogger(log *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		l := slog.LevelDebug
		if level == esdb.LogWarn {
			l = slog.LevelInfo
		}
		if log.Enabled(context.Background(), l) {
			log.Log(context.Background(), l, "kurrentdb client: "+fmt.Sprintf(format, args...))
		}
	}
}

// call runs fn with the current client, under ctx bounded by the call
// timeout and by Close. A client that has shut down for good (it does
// after a failed discovery) is replaced, so that the next call dials
// again.
func (s *Store) call(ctx context.Context, fn func(ctx context.Context, cli *esdb.Client) error) error {
	c, err := s.acquire()
	if err != nil {
		return err
	}
	defer c.users.Done()
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()
	err = fn(ctx, c.cli)
	if isCode(err, esdb.ErrorCodeConnectionClosed) {
		s.replace(c)
	}
	return err
}

// acquire returns the current client, counted as in use.
func (s *Store) acquire() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, eventstore.ErrClosed
	}
	s.conn.users.Add(1)
	return s.conn, nil
}

// replace swaps old for a new client, unless another call did already,
// and closes old once its calls are done.
func (s *Store) replace(old *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn != old {
		return
	}
	cli, err := esdb.NewClient(s.cfg)
	if err != nil {
		s.log.Error("kurrentdb: cannot make a new client", "err", err)
		return
	}
	s.conn = &conn{cli: cli}
	s.log.Info("kurrentdb: the client closed its connection for good; a new client dials again")
	go func() {
		old.users.Wait()
		_ = old.cli.Close()
	}()
}

// Close ends every call in flight, closes the client and makes every later
// call fail with [eventstore.ErrClosed]. It is idempotent.
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
	s.live.Wait()
	c.users.Wait()
	return c.cli.Close()
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// isCode reports whether err is the client's error with code.
func isCode(err error, code esdb.ErrorCode) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == code
}
