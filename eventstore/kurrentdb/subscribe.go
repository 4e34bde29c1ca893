package kurrentdb

import (
	"context"
	"iter"
	"log/slog"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
)

// Subscribe implements [eventstore.Store.Subscribe].
//
// A filtered subscription is a subscription of the server's to $all, with
// KurrentDB's own filter on one of the filter's two dimensions (its
// stream prefixes when it has any, otherwise its types, as prefixes of
// event types), and the rest of the filter applied here: the server then
// sends only what may match, which matters for a consumer of a few types
// in a large log. The client never resubscribes a subscription that
// drops; this one does, from the last event it received, so that a drop
// loses and doubles nothing.
//
// An unfiltered subscription reads pages of $all as ReadAll does, woken by
// the store's live subscription to the server (see watch), and reads
// again every PollInterval while that is down.
func (s *Store) Subscribe(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	if filter.IsZero() {
		return storekit.Follow(ctx, after, filter, s.readPage, storekit.FollowOptions{
			Changed:      s.changes.Changed,
			PollInterval: s.opts.PollInterval,
			Closed:       s.done,
			Transient:    transient,
			Logger:       s.log,
		})
	}
	return func(yield func(eventstore.Event, error) bool) {
		if err := filter.Validate(); err != nil {
			yield(eventstore.Event{}, err)
			return
		}
		waits := backoff.Policy{Initial: 50 * time.Millisecond, Max: s.opts.PollInterval}
		for attempt := 1; ; attempt++ {
			stopped, progressed, err := s.follow(ctx, &after, filter, yield)
			switch {
			case stopped:
				return
			case ctx.Err() != nil:
				yield(eventstore.Event{}, ctx.Err())
				return
			case s.isClosed():
				yield(eventstore.Event{}, eventstore.ErrClosed)
				return
			case !transient(err):
				yield(eventstore.Event{}, s.fail(ctx, "subscribe to $all after "+after.String(), err))
				return
			}
			if progressed {
				attempt = 1
			}
			s.log.DebugContext(ctx, "kurrentdb: subscription dropped; subscribing again",
				slog.String("position", after.String()), slog.Any("error", err))
			select {
			case <-ctx.Done():
			case <-s.done:
			case <-time.After(waits.Delay(attempt)):
			}
		}
	}
}

// follow runs one server subscription to $all after *after, yielding what
// matches filter and moving *after past every record received. It returns
// when yield asks to stop (stopped), or with the reason the subscription
// ended, and whether it received anything. The subscription is received
// in a goroutine of its own (see receive), so that a subscriber whose
// context ends, or whose store closes, returns even while the client
// holds the subscription inside (see conn).
func (s *Store) follow(ctx context.Context, after *eventstore.Position, filter eventstore.Filter, yield func(eventstore.Event, error) bool) (stopped, progressed bool, err error) {
	c, err := s.acquire()
	if err != nil {
		return false, false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	opts := esdb.SubscribeToAllOptions{From: esdb.Start{}, Filter: serverFilter(filter)}
	if !after.IsZero() {
		opts.From = esdb.Position{Commit: after.Major, Prepare: after.Minor}
	}
	records := make(chan received, 64)
	go receive(ctx, c, opts, records)
	for {
		var r received
		select {
		case r = <-records:
		case <-ctx.Done():
			return false, progressed, ctx.Err()
		}
		if r.err != nil {
			return false, progressed, r.err
		}
		if r.caughtUp {
			continue
		}
		pos := position(r.rec)
		if !after.Before(pos) {
			continue // the server starts after a position; a repeat is dropped all the same
		}
		*after, progressed = pos, true
		if !cairns(r.rec) {
			continue
		}
		e, err := toEvent(r.rec)
		if err != nil {
			return false, progressed, err
		}
		if filter.Match(&e) && !yield(e, nil) {
			return true, progressed, nil
		}
	}
}

// received is a record a subscription received, the news that it has
// caught up, or why it ended.
type received struct {
	rec      *esdb.RecordedEvent
	caughtUp bool
	err      error
}

// receive subscribes to $all with opts on c's client and sends what it
// receives to out, until the subscription ends (the last thing sent is
// why) or ctx does. It runs in a goroutine of its own, so that its reader
// can leave when its context ends even while the client holds the
// subscription inside (see conn).
func receive(ctx context.Context, c *conn, opts esdb.SubscribeToAllOptions, out chan<- received) {
	send := func(r received) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	defer recovered(c, func(err error) { send(received{err: err}) })
	sub, err := c.cli.SubscribeToAll(ctx, opts)
	if err != nil {
		send(received{err: err})
		return
	}
	defer sub.Close()
	for {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			send(received{err: ev.SubscriptionDropped.Error})
			return
		case ev.CaughtUp != nil:
			if !send(received{caughtUp: true}) {
				return
			}
			continue
		case ev.EventAppeared == nil || ev.EventAppeared.Event == nil:
			continue // checkpoints, links: nothing to deliver
		}
		if !send(received{rec: ev.EventAppeared.Event}) {
			return
		}
	}
}

// serverFilter is the half of filter that KurrentDB applies: its stream
// prefixes, or else its types as prefixes of event types (the server
// filters on one dimension, by prefix or regular expression; prefixes need
// no escaping).
func serverFilter(filter eventstore.Filter) *esdb.SubscriptionFilter {
	if len(filter.StreamPrefixes) > 0 {
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: filter.StreamPrefixes}
	}
	return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: filter.Types}
}
