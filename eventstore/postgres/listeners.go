package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// A store's NOTIFY is a hint for the subscribers of other processes, and
// each costs a round trip and a transaction of its own (with a transaction
// ID) on the server: at one NOTIFY per 5 ms, 40-50 µs of client and of
// server CPU per bus command on this project's benchmark machine.
// Most deployments embed the store in one process, whose subscribers its
// appends wake directly, and then nobody hears them. So a store's LISTEN
// connection names itself (application_name, which pg_stat_activity shows
// to every login), and the notify worker sends a NOTIFY only while another
// store's listener on the channel is connected to the database (unless
// Options.AlwaysNotify). It checks at most once per listenerCheckEvery; a
// listener that connects in between is not seen by appenders for that
// long, so for a little longer than that after its LISTEN it wakes its own
// subscribers every listenerWarmUpTick, and they find those appends by
// reading.

// listenerCheckEvery is how long the notify worker trusts what it last
// found about other listeners.
const listenerCheckEvery = time.Second

// listenerWarmUp is how much longer than listenerCheckEvery (by when every
// appender has seen it) a listener wakes its subscribers every
// listenerWarmUpTick after its LISTEN.
const (
	listenerWarmUp     = 250 * time.Millisecond
	listenerWarmUpTick = 50 * time.Millisecond
)

// listenerPresenceSQL reports whether a connection of the current database
// has an application_name that starts with $1 (a listener on the channel)
// but not with $2 (the store's own listener): a store's own subscribers
// are woken directly, so its own listener does not count, however its
// connection comes and goes.
const listenerPresenceSQL = `SELECT EXISTS (SELECT FROM pg_stat_activity
	WHERE starts_with(application_name, $1) AND NOT starts_with(application_name, $2)
		AND datname = current_database())`

// listenerPrefix is how the application_name of every LISTEN connection
// on channel starts: a hash of the channel, so that it is short ASCII
// (PostgreSQL keeps 63 bytes of an application name and replaces other
// characters) whatever the channel's name.
func listenerPrefix(channel string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(channel))
	return fmt.Sprintf("cairn-listen-%016x-", h.Sum64())
}

// newListenerName is the application_name of a store's LISTEN connection:
// listenerPrefix and a random token of the store's, by which it knows its
// own listener from others'. The connection's name is this, then a space
// and the application_name of the store's pool, if it has one: PostgreSQL
// keeps the first 63 bytes, and a proxy that adds to the end of the name
// (PgBouncer's application_name_add_host) keeps the start.
func newListenerName(channel string) string {
	return fmt.Sprintf("%s%016x", listenerPrefix(channel), rand.Uint64())
}

// listenerPresence is what the notify worker last found, and when. Only
// the notify worker uses it; appends read [Store.quietUntil], so that while
// nobody listens they do not wake the worker at all (a goroutine wake-up
// per append cost more CPU than the NOTIFYs it spared).
type listenerPresence struct {
	checked time.Time
	others  bool
}

// othersListen reports whether another store listens on the channel, as
// the notify worker last found it, looking again when that is older than
// s.listenerCheck (listenerCheckEvery but in tests); always yes with
// [Options.AlwaysNotify]. When it cannot tell, it answers yes: a NOTIFY
// too many costs less than a subscriber left to its poll.
func (s *Store) othersListen(ctx context.Context) bool {
	if s.alwaysNotify {
		return true
	}
	now := time.Now()
	if !s.presence.checked.IsZero() && now.Sub(s.presence.checked) < s.listenerCheck {
		return s.presence.others
	}
	others := true
	if err := s.pool.QueryRow(ctx, listenerPresenceSQL, listenerPrefix(s.channel), s.listenerName).Scan(&others); err != nil {
		others = true
	}
	s.presence = listenerPresence{checked: now, others: others}
	quiet := time.Duration(0)
	if !others {
		// On the monotonic clock: a wall clock stepped back would
		// otherwise silence the store for as long as the step.
		quiet = now.Sub(s.started) + s.listenerCheck
	}
	s.quietUntil.Store(int64(quiet))
	return others
}

// quiet reports whether the notify worker found, less than
// s.listenerCheck ago, that no other store listens.
func (s *Store) quiet() bool {
	return time.Since(s.started) < time.Duration(s.quietUntil.Load())
}

// warmUp wakes the store's subscribers every listenerWarmUpTick, through
// hints, for listenerWarmUp past the listener check's period, after its
// listener has connected.
func (s *Store) warmUp(ctx context.Context, hints chan<- struct{}) {
	defer s.workers.Done()
	tick := time.NewTicker(listenerWarmUpTick)
	defer tick.Stop()
	end := time.After(s.listenerCheck + listenerWarmUp)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-tick.C:
			hint(hints)
		}
	}
}
