package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
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
// store's listener on the channel is connected to the database. It checks
// at most once per listenerCheckEvery; a listener that connects in between
// is not seen by appenders for that long, so for a little longer than that
// after its LISTEN it wakes its own subscribers every listenerWarmUpTick,
// and they find those appends by reading.

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
// other than $2 (the store's own listener, 0 for none) is named $1.
const listenerPresenceSQL = `SELECT EXISTS (SELECT FROM pg_stat_activity
	WHERE application_name = $1 AND datname = current_database() AND pid <> $2)`

// listenerName is the application_name of a LISTEN connection on channel:
// a hash of the channel, so that it is short ASCII (PostgreSQL keeps 63
// bytes of an application name and replaces other characters) whatever
// the channel's name.
func listenerName(channel string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(channel))
	return fmt.Sprintf("cairn-listen-%016x", h.Sum64())
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
// s.listenerCheck (listenerCheckEvery but in tests). When it cannot tell, it answers yes: a NOTIFY too
// many costs less than a subscriber left to its poll.
func (s *Store) othersListen(ctx context.Context) bool {
	now := time.Now()
	if !s.presence.checked.IsZero() && now.Sub(s.presence.checked) < s.listenerCheck {
		return s.presence.others
	}
	others := true
	if err := s.pool.QueryRow(ctx, listenerPresenceSQL, s.listenerName, int64(s.listenerPID.Load())).Scan(&others); err != nil {
		others = true
	}
	s.presence = listenerPresence{checked: now, others: others}
	quiet := int64(0)
	if !others {
		quiet = now.Add(s.listenerCheck).UnixNano()
	}
	s.quietUntil.Store(quiet)
	return others
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
