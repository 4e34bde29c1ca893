package postgres

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Subscribe implements [eventstore.Store.Subscribe]. Subscribers read below
// the horizon (see the package documentation), are woken by this store's
// appends and, through LISTEN/NOTIFY, by other processes' appends, and poll
// every [Options.PollInterval] for the rest. A read that fails because the
// connection dropped is retried from the same position, so the subscriber
// resumes without loss; other errors end the subscription.
func (s *Store) Subscribe(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	s.startListener()
	return storekit.Follow(ctx, after, filter, s.readPage, storekit.FollowOptions{
		PageSize:     s.pageSize,
		Changed:      s.changes.Changed,
		PollInterval: s.poll,
		Closed:       s.done,
		Transient:    transient,
		Logger:       s.logger,
	})
}

// transient reports read errors worth retrying: a dropped or refused
// connection, a server restarting, a backend terminated by an operator.
func transient(err error) bool {
	switch {
	case errors.Is(err, eventstore.ErrClosed), errors.Is(err, eventstore.ErrCorrupt),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),                                 // insufficient resources (too many connections)
			strings.HasPrefix(pgErr.Code, "57P"),                                // admin shutdown, crash shutdown, cannot connect now
			pgErr.Code == "40001", pgErr.Code == "40P01", pgErr.Code == "55P03": // serialization, deadlock, lock not available
			return true
		}
		return false // the statement is wrong for this server: retrying will not help
	}
	return true // an I/O error: the connection is gone, and the pool makes a new one
}

// wake tells subscribers that the store changed: those of this process at
// once, those of others by a NOTIFY that the notify worker sends, unless
// the worker found lately that no other store listens (listeners.go).
func (s *Store) wake() {
	s.changes.Notify()
	if s.quiet() {
		return
	}
	select {
	case s.notify <- struct{}{}:
	default: // a NOTIFY is already due; it covers this append too
	}
}

// notifyGap is the least time between two NOTIFYs of one store.
const notifyGap = 5 * time.Millisecond

// notifyWorker sends NOTIFY for appends, outside their transactions: a
// NOTIFY inside an append would take PostgreSQL's global notification lock
// at commit and serialize every appender. Appends that happen while one
// NOTIFY is on its way share the next one.
func (s *Store) notifyWorker() {
	defer s.workers.Done()
	for {
		select {
		case <-s.workerCtx.Done():
			return
		case <-s.notify:
		}
		ctx, cancel := context.WithTimeout(s.workerCtx, 10*time.Second)
		if !s.othersListen(ctx) {
			// Nobody would hear it; appends stop asking until the worker
			// is due to look again (listeners.go).
			cancel()
			continue
		}
		// The notification is a hint, so its transaction need not wait for
		// the WAL flush; set_config(..., true) applies to it alone.
		_, err := s.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`, s.channel)
		cancel()
		if err != nil && s.workerCtx.Err() == nil {
			// Not fatal: other processes' subscribers poll.
			s.logger.Debug("postgres eventstore: NOTIFY failed", slog.String("schema", s.schema), slog.Any("error", err))
		}
		// Appends during the gap share the next NOTIFY, which bounds the
		// server's notification work (a transaction each) however fast
		// appends come, for at most notifyGap of extra wake-up delay in
		// other processes.
		select {
		case <-s.workerCtx.Done():
			return
		case <-time.After(notifyGap):
		}
	}
}

// startListener starts, once, the worker that LISTENs for other processes'
// appends.
func (s *Store) startListener() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.listening || s.closed.Load() {
		return
	}
	s.listening = true
	s.workers.Add(1)
	go s.listen()
}

// listen keeps a connection of its own LISTENing and wakes subscribers on
// notifications, at most once per wake interval (see coalesce). When the
// connection drops it reconnects, and wakes subscribers once it listens
// again, since notifications sent in between are lost.
func (s *Store) listen() {
	defer s.workers.Done()
	ctx := s.workerCtx
	hints := make(chan struct{}, 1)
	s.workers.Add(1)
	go s.coalesce(ctx, hints)
	backoff := 100 * time.Millisecond
	for {
		listened, err := s.listenOn(ctx, hints)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = 100 * time.Millisecond
		}
		s.logger.Warn("postgres eventstore: LISTEN connection lost; subscribers poll until it is back",
			slog.String("schema", s.schema), slog.Duration("retry_in", backoff), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listenOn(ctx context.Context, hints chan<- struct{}) (listened bool, err error) {
	// Named so that other stores' notify workers know someone listens
	// (listeners.go).
	cfg := s.pool.Config().ConnConfig.Copy()
	name := s.listenerName
	if app := cfg.RuntimeParams["application_name"]; app != "" {
		name += " " + app
	}
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return false, err
	}
	hint(hints)
	s.workers.Add(1)
	go s.warmUp(ctx, hints)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		hint(hints)
	}
}

// hint passes a notification on to coalesce, unless one is waiting there
// already: the waiting one covers it.
func hint(hints chan<- struct{}) {
	select {
	case hints <- struct{}{}:
	default:
	}
}

// coalesce wakes the store's subscribers on each hint, then waits the wake
// interval before it takes the next: however many notifications arrive
// meanwhile (any login of the database may send them), they share one
// wake-up at the interval's end, and each subscriber reads at most once
// per interval because of them.
func (s *Store) coalesce(ctx context.Context, hints <-chan struct{}) {
	defer s.workers.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hints:
		}
		s.changes.Notify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.wakeGap):
		}
	}
}
