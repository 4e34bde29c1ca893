// Package memory is an in-memory [eventstore.Store] for tests and
// prototypes. It keeps everything in memory and loses it when the process
// ends; otherwise it honours the whole store contract, and live subscribers
// are woken by commits, not by polling.
//
// Like the SQLite and PostgreSQL stores, one [Store] is complete: besides
// the events it keeps what Cairn's consumers find on a store (checkpoints,
// with transactions and a small key/value read model, dead letters,
// leases, aggregate snapshots and the command index), so a bus, a
// projection and a saga runner given it need nothing else. A test that
// wants consumer state apart from the events uses two stores.
package memory

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Store is an in-memory event store that implements every interface of
// package storekit: [storekit.CommandIndex], [storekit.SnapshotStore], [storekit.Catalog],
// [storekit.DeadLetterStore], [storekit.LeaseStore], and
// [storekit.TxCheckpointStore] and [storekit.TxLeaseStore] with [*Tx]. The
// zero value is not usable; call [New].
type Store struct {
	consumers // checkpoints, dead letters, leases, read model
	snapshots

	mu      sync.RWMutex
	log     eventLog // the event at index i has position {Major: i+1}
	data    dataBlocks
	streams streamIndex
	closed  bool

	changes storekit.Notifier
	done    chan struct{}
	now     func() time.Time

	// The page readers, bound once: a method value made at each read is
	// an allocation.
	readStreamPage storekit.StreamPageAppender
	readLogPage    storekit.PageReader
}

// New returns an empty in-memory store.
func New() *Store {
	s := &Store{
		streams: newStreamIndex(),
		done:    make(chan struct{}),
		now:     func() time.Time { return time.Now().UTC() },
	}
	s.readStreamPage, s.readLogPage = s.streamPage, s.readPage
	s.consumers.init(s.done)
	s.snapshots.init(s.done)
	return s
}

var (
	_ eventstore.Store                = (*Store)(nil)
	_ storekit.CommandIndex           = (*Store)(nil)
	_ storekit.SnapshotStore          = (*Store)(nil)
	_ storekit.DeadLetterStore        = (*Store)(nil)
	_ storekit.LeaseStore             = (*Store)(nil)
	_ storekit.TxCheckpointStore[*Tx] = (*Store)(nil)
	_ storekit.TxLeaseStore[*Tx]      = (*Store)(nil)
	_ storekit.PagedStreams           = (*Store)(nil)
)

// Append implements [eventstore.Store.Append].
func (s *Store) Append(ctx context.Context, name string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	// Most appends are of a few events: their checked copies stay on the
	// stack (they are copied again, into the log, and their payloads,
	// which they share with the caller's, into its data blocks). The IDs
	// the store makes and RecordedAt come from one clock reading, where
	// two reads were a twentieth of an append. (Appends that race may
	// then record times out of their positions' order by as long as one
	// waits for the lock, as on PostgreSQL, which records the statement's
	// start.)
	var local [4]eventstore.EventData
	now := s.now()
	events, err := storekit.PrepareAppendWith(ctx, name, events, storekit.PrepareOptions{Into: local[:0], Now: now, SharedData: true})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	key := s.streams.hash(name)
	st, chain := s.streams.find(key, name)
	var next uint64
	if st != nil {
		next = uint64(len(st.entries))
	}
	current := storekit.StreamState(next-1, st != nil)

	if st != nil {
		// The map CheckRepeat takes is made only for a repeat, which is
		// rare: an append finds none of its IDs.
		var stored map[uuid.UUID]uint64
		for i := range events {
			if v, ok := st.version(&s.log, events[i].ID); ok {
				if stored == nil {
					stored = make(map[uuid.UUID]uint64, len(events))
				}
				stored[events[i].ID] = v
			}
		}
		first, repeat, err := storekit.CheckRepeat(name, expected, events, storekit.Repeat{Stored: stored, Current: current})
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if repeat {
			last := first + uint64(len(events)) - 1
			return eventstore.AppendResult{
				FirstVersion: first,
				LastVersion:  last,
				Position:     s.log.at(st.entries[last]).Position,
				Duplicate:    true,
			}, nil
		}
	}
	if !expected.Matches(next-1, st != nil) {
		return eventstore.AppendResult{}, &eventstore.WrongVersionError{Stream: name, Expected: expected, Actual: current}
	}

	if st == nil {
		st = s.streams.add(key, name, chain)
	}
	for i := range events {
		index := s.log.n
		e := s.log.add()
		*e = eventstore.Event{
			EventData:  events[i],
			StreamID:   name,
			Version:    next + uint64(i),
			Position:   eventstore.Position{Major: uint64(index) + 1},
			RecordedAt: now,
		}
		e.Data = s.data.copy(events[i].Data)
		st.add(&s.log, index)
	}
	s.changes.Notify()
	return eventstore.AppendResult{
		FirstVersion: next,
		LastVersion:  next + uint64(len(events)) - 1,
		Position:     s.log.last().Position,
	}, nil
}

// ReadStream implements [eventstore.Store.ReadStream]. It copies events out
// a page at a time, so the consumer may append while it ranges.
func (s *Store) ReadStream(ctx context.Context, name string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadStreamPagesInto(ctx, name, opts, s.readStreamPage, 0)
}

// StreamPages implements [storekit.PagedStreams]: ReadStream's page reader.
func (s *Store) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	return s.readStreamPage, 0, s
}

// ReadAll implements [eventstore.Store.ReadAll].
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadPages(ctx, after, filter, s.readLogPage, 0)
}

// Subscribe implements [eventstore.Store.Subscribe]; live subscribers wake
// on commit.
func (s *Store) Subscribe(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	return storekit.Follow(ctx, after, filter, s.readLogPage, storekit.FollowOptions{
		Changed: s.changes.Changed,
		Closed:  s.done,
	})
}

// Close implements [eventstore.Store.Close]. Every method of a closed store
// (reads, appends, subscriptions, and what consumers and snapshots keep)
// fails with [eventstore.ErrClosed].
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}
