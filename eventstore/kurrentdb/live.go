package kurrentdb

import (
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/internal/backoff"
)

// watch keeps one subscription to the server's $all open while the store
// is, and wakes the store's subscribers at each event appended by anyone,
// so that they read without polling. The events themselves are read by the
// subscribers, from where each is, so a subscription that drops loses
// nothing: watch subscribes again (the client never does) and wakes every
// subscriber once, for what it may have missed.
func (s *Store) watch() {
	defer s.live.Done()
	waits := backoff.Policy{Initial: 50 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 1; ; attempt++ {
		if s.subscribeOnce() {
			attempt = 1
		}
		s.changes.Notify()
		if backoff.Wait(s.closing, waits.Delay(attempt)) != nil {
			return
		}
	}
}

// subscribeOnce follows $all from its end until the subscription drops or
// the store closes, and reports whether it was ever live.
func (s *Store) subscribeOnce() (live bool) {
	c, err := s.acquire()
	if err != nil {
		return false
	}
	defer recovered(c, func(err error) { live = false })
	sub, err := c.cli.SubscribeToAll(s.closing, esdb.SubscribeToAllOptions{
		From:   esdb.End{},
		Filter: esdb.ExcludeSystemEventsFilter(),
	})
	if err != nil {
		if s.closing.Err() == nil {
			s.log.Debug("kurrentdb: live subscription failed; subscribers poll until it is back", "err", err)
		}
		return false
	}
	defer sub.Close()
	for {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			if s.closing.Err() == nil {
				s.log.Debug("kurrentdb: live subscription dropped; subscribing again", "err", ev.SubscriptionDropped.Error)
			}
			return live
		case ev.EventAppeared != nil:
			live = true
			if e := ev.EventAppeared.Event; e == nil || !isState(e.StreamID) {
				s.changes.Notify()
			}
		case ev.CaughtUp != nil:
			live = true
		}
	}
}
