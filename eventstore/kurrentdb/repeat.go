package kurrentdb

import (
	"context"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/lru"
)

// repeatCache remembers, per stream, the event IDs the store has seen in
// it and up to which version, so that the repeat check of an append reads
// only what was appended since. Streams only grow, so what it remembers
// stays true; the least recently used streams are forgotten first.
type repeatCache struct {
	streams *lru.Cache[*streamIDs]
	mu      sync.Mutex // makes the lookup-or-insert of a stream's entry atomic
}

// streamIDs is what the store knows of one stream's event IDs.
type streamIDs struct {
	mu   sync.Mutex
	next uint64               // the IDs of versions below next are in ids
	ids  map[uuid.UUID]uint64 // event ID -> version
}

func newRepeatCache(streams int) *repeatCache {
	return &repeatCache{streams: lru.New[*streamIDs](streams)}
}

// entry returns the entry of stream, making it if needed.
func (c *repeatCache) entry(stream string) *streamIDs {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.streams.Get(stream); ok {
		return e
	}
	e := &streamIDs{ids: make(map[uuid.UUID]uint64)}
	c.streams.Put(stream, e)
	return e
}

// record notes the IDs of events just written to stream from version
// first, when the entry has seen every version before first.
func (c *repeatCache) record(stream string, first uint64, events []eventstore.EventData) {
	e := c.entry(stream)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.next != first {
		return // a gap: the next look-up reads it
	}
	for i := range events {
		e.ids[events[i].ID] = first + uint64(i)
	}
	e.next = first + uint64(len(events))
}

// seen is what a look-up found of an append's IDs in its stream.
type seen struct {
	storekit.Repeat
	last   uint64
	exists bool
}

// lookUp finds which of the events' IDs stream holds, and the stream's
// state, reading the events appended since the stream was last looked up.
func (s *Store) lookUp(ctx context.Context, stream string, events []eventstore.EventData) (seen, error) {
	e := s.repeats.entry(stream)
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		read := 0
		exists, err := s.readStream(ctx, stream, e.next, false, storekit.DefaultPageSize, func(r *esdb.RecordedEvent) (bool, error) {
			read++
			if r.EventNumber >= e.next {
				e.ids[r.EventID] = r.EventNumber
				e.next = r.EventNumber + 1
			}
			return true, nil
		})
		if err != nil {
			return seen{}, err
		}
		if !exists && e.next > 0 {
			// Deleted outside Cairn: what was there is gone.
			e.next, e.ids = 0, make(map[uuid.UUID]uint64)
		}
		if read < storekit.DefaultPageSize {
			break
		}
	}
	found := seen{exists: e.next > 0, last: e.next - 1}
	found.Current = storekit.StreamState(found.last, found.exists)
	for i := range events {
		if v, ok := e.ids[events[i].ID]; ok {
			if found.Stored == nil {
				found.Stored = make(map[uuid.UUID]uint64)
			}
			found.Stored[events[i].ID] = v
		}
	}
	return found, nil
}
