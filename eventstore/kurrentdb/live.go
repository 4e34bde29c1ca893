package kurrentdb

import (
	"context"
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
	ctx, cancel := context.WithCancel(s.closing)
	defer cancel()
	records := make(chan received, 64)
	go receive(ctx, c, esdb.SubscribeToAllOptions{From: esdb.End{}, Filter: esdb.ExcludeSystemEventsFilter()}, records)
	for {
		var r received
		select {
		case r = <-records:
		case <-ctx.Done():
			return live
		}
		switch {
		case r.err != nil:
			if s.closing.Err() == nil {
				s.log.Debug("kurrentdb: live subscription ended; subscribers poll until it is back", "error", r.err)
			}
			return live
		case r.caughtUp:
			live = true
		default:
			live = true
			if !isState(r.rec.StreamID) {
				s.changes.Notify()
			}
		}
	}
}
