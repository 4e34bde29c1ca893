package kurrentdb

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.Catalog = (*Store)(nil)

// catalogPage is how many names one pass over $all collects at most.
const catalogPage = 1024

// KurrentDB keeps no index of streams that Cairn can read in name order,
// so each listing reads the log: a subscription to $all from its start,
// filtered by the server on stream prefix, up to where it reports itself
// caught up. One pass collects, of the names past the listing's cursor,
// the catalogPage lowest (see lowest), so that memory stays bounded
// however many events and streams the log holds; a listing of more than
// catalogPage names takes another pass from the last name listed. So a
// listing costs one read of the matching part of the log per
// catalogPage names listed: Streams with a prefix reads the events of the
// streams under it (the server skips the rest), Streams with none reads
// all of $all, and Consumers and Snapshots read the state streams of
// their kinds (whose $maxCount keeps them short) and then each listed
// consumer's or snapshot's state, as Checkpoint or LoadSnapshot would.

// Streams implements [storekit.Catalog.Streams] by reading $all (see
// above). It lists what ReadAll yields: KurrentDB's system streams and
// records and the store's own state streams are left out.
func (s *Store) Streams(ctx context.Context, prefix, after string) iter.Seq2[storekit.StreamInfo, error] {
	return func(yield func(storekit.StreamInfo, error) bool) {
		// The server filters on the longest prefix it can be given (valid
		// UTF-8); the exact byte prefix is checked here.
		server, _ := storekit.NameRange(prefix, "")
		filter := esdb.ExcludeSystemEventsFilter()
		if server != "" {
			filter = &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{server}}
		}
		for {
			page := newLowest[storekit.StreamInfo](after, catalogPage)
			err := s.scan(ctx, filter, func(r *esdb.RecordedEvent) error {
				if cairns(r) && strings.HasPrefix(r.StreamID, prefix) {
					// Records come in log order, so the last one put is the
					// stream's last event.
					page.put(r.StreamID, storekit.StreamInfo{Name: r.StreamID, LastVersion: r.EventNumber, LastPosition: position(r)})
				}
				return nil
			})
			if err != nil {
				yield(storekit.StreamInfo{}, err)
				return
			}
			names, full := page.sorted()
			for _, name := range names {
				if !yield(page.items[name], nil) {
					return
				}
			}
			if !full {
				return
			}
			after = names[len(names)-1]
		}
	}
}

// Consumers implements [storekit.Catalog.Consumers]: it finds the
// consumers in the names of their checkpoint, lease and dead-letter
// streams (see above), and reads what each keeps.
func (s *Store) Consumers(ctx context.Context) iter.Seq2[storekit.ConsumerInfo, error] {
	return func(yield func(storekit.ConsumerInfo, error) bool) {
		after := ""
		for {
			names, full, err := s.stateKeys(ctx, after, checkpointKind, leaseKind, deadLetterKind)
			if err != nil {
				yield(storekit.ConsumerInfo{}, err)
				return
			}
			for _, name := range names {
				c, err := s.consumer(ctx, name)
				if err != nil {
					yield(storekit.ConsumerInfo{}, err)
					return
				}
				if (c.HasCheckpoint || c.HasLease || c.DeadLetters > 0) && !yield(c, nil) {
					return
				}
			}
			if !full {
				return
			}
			after = names[len(names)-1]
		}
	}
}

// consumer reads what the store keeps for consumer name.
func (s *Store) consumer(ctx context.Context, name string) (storekit.ConsumerInfo, error) {
	c := storekit.ConsumerInfo{Name: name}
	stream := stateStream(checkpointKind, name)
	last, err := s.lastRecord(ctx, stream)
	if err != nil {
		return c, err
	}
	if last != nil {
		if c.Checkpoint, err = decodeCheckpoint(stream, name, last); err != nil {
			return c, err
		}
		c.HasCheckpoint, c.CheckpointSaved = true, last.CreatedDate.UTC()
	}
	lease, _, err := s.storedLease(ctx, name)
	if err != nil {
		return c, err
	}
	if lease != nil {
		c.Lease, c.HasLease = leaseOf(*lease), true
	}
	for d, err := range s.DeadLetters(ctx, name) {
		if err != nil {
			return c, err
		}
		c.DeadLetters++
		if c.OldestDeadLetter.IsZero() || d.FirstFailure.Before(c.OldestDeadLetter) {
			c.OldestDeadLetter = d.FirstFailure
		}
	}
	return c, nil
}

// Snapshots implements [storekit.Catalog.Snapshots]: it finds the
// snapshots in the names of their streams (see above), and loads each.
func (s *Store) Snapshots(ctx context.Context, after string) iter.Seq2[storekit.Snapshot, error] {
	return func(yield func(storekit.Snapshot, error) bool) {
		for {
			streams, full, err := s.stateKeys(ctx, after, snapshotKind)
			if err != nil {
				yield(storekit.Snapshot{}, err)
				return
			}
			for _, stream := range streams {
				snap, ok, err := s.LoadSnapshot(ctx, stream)
				if err != nil {
					yield(storekit.Snapshot{}, err)
					return
				}
				if ok && !yield(snap, nil) {
					return
				}
			}
			if !full {
				return
			}
			after = streams[len(streams)-1]
		}
	}
}

// stateKeys returns, in order, the lowest catalogPage keys (consumer
// names, or the streams of snapshots) after after of the state streams of
// kinds, and whether there may be more.
func (s *Store) stateKeys(ctx context.Context, after string, kinds ...string) ([]string, bool, error) {
	prefixes := make([]string, len(kinds))
	for i, kind := range kinds {
		prefixes[i] = StatePrefix + kind
	}
	keys := newLowest[struct{}](after, catalogPage)
	err := s.scan(ctx, &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: prefixes}, func(r *esdb.RecordedEvent) error {
		for _, kind := range kinds {
			if key, ok := stateKey(kind, r); ok {
				keys.put(key, struct{}{})
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	names, full := keys.sorted()
	return names, full, nil
}

// stateKey returns the key of the state stream of kind that r is a record
// of: its name after the kind's prefix, or, where the name holds a hash of
// the key (see stateStream), the key that the record repeats. false when r
// is of no such stream, or when its key is not the one its stream is for
// (a record that names none, such as a compaction's marker; the stream's
// other records name it).
func stateKey(kind string, r *esdb.RecordedEvent) (string, bool) {
	rest, ok := strings.CutPrefix(r.StreamID, StatePrefix+kind)
	if !ok {
		return "", false
	}
	if key, short := strings.CutPrefix(rest, "-"); short {
		return key, key != ""
	}
	var f struct {
		Consumer string `json:"consumer"`
		Name     string `json:"name"`
		Stream   string `json:"stream"`
	}
	if json.Unmarshal(r.UserMetadata, &f) != nil {
		return "", false
	}
	for _, key := range []string{f.Consumer, f.Name, f.Stream} {
		if key != "" && stateStream(kind, key) == r.StreamID {
			return key, true
		}
	}
	return "", false
}

// scan gives fn the records of $all that filter selects, from the start of
// the log up to where the subscription reports itself caught up, in log
// order. It subscribes, rather than reads, because only a subscription
// has the server filter the log.
func (s *Store) scan(ctx context.Context, filter *esdb.SubscriptionFilter, fn func(*esdb.RecordedEvent) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	c, err := s.acquire()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	records := make(chan received, 64)
	go receive(ctx, c, esdb.SubscribeToAllOptions{From: esdb.Start{}, Filter: filter}, records)
	for {
		var r received
		select {
		case r = <-records:
		case <-ctx.Done():
			if s.isClosed() {
				return eventstore.ErrClosed
			}
			return ctx.Err()
		}
		switch {
		case r.err != nil:
			return s.fail(ctx, "read $all for the catalog", r.err)
		case r.caughtUp:
			return nil
		}
		if err := fn(r.rec); err != nil {
			return err
		}
	}
}

// lowest keeps the n lowest names put after after, each with its item,
// in memory that n bounds: once it holds 2n names it drops all but the
// n lowest, and from then on takes no name above the highest it kept.
type lowest[T any] struct {
	after string
	n     int
	items map[string]T
	bound string // "" until the first drop
	full  bool   // a name was dropped or refused
}

func newLowest[T any](after string, n int) *lowest[T] {
	return &lowest[T]{after: after, n: n, items: make(map[string]T)}
}

// put keeps item under name, replacing what it kept there, if name is
// among the n lowest after after so far.
func (l *lowest[T]) put(name string, item T) {
	if name <= l.after || (l.full && name > l.bound) {
		l.full = l.full || name > l.after
		return
	}
	l.items[name] = item
	if len(l.items) < 2*l.n {
		return
	}
	names := slices.Sorted(mapsKeys(l.items))
	for _, drop := range names[l.n:] {
		delete(l.items, drop)
	}
	l.bound, l.full = names[l.n-1], true
}

// sorted returns the n lowest names, in order, and whether names were
// left out above them.
func (l *lowest[T]) sorted() ([]string, bool) {
	names := slices.Sorted(mapsKeys(l.items))
	if len(names) > l.n {
		names, l.full = names[:l.n], true
	}
	return names, l.full
}

func mapsKeys[T any](m map[string]T) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
