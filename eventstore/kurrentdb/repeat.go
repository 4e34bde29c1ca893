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

// repeatCache remembers, per stream, the event IDs and command IDs the
// store has seen in it and up to which version, so that the repeat check of
// an append, and a command look-up, read only what was appended since.
// Streams only grow, so what it remembers stays true; the least recently
// used streams are forgotten first.
type repeatCache struct {
	streams *lru.Cache[*streamIDs]
}

// streamIDs is what the store knows of one stream's event IDs.
type streamIDs struct {
	mu       sync.Mutex
	next     uint64               // the IDs of versions below next are in ids and commands
	ids      map[uuid.UUID]uint64 // event ID -> version
	commands map[string][2]uint64 // command ID -> its first and last versions
}

// reset forgets what the entry knew: the stream was deleted.
func (e *streamIDs) reset() {
	e.next, e.ids, e.commands = 0, make(map[uuid.UUID]uint64), make(map[string][2]uint64)
}

// add notes the event at version, of command (empty for none).
func (e *streamIDs) add(id uuid.UUID, version uint64, command string) {
	e.ids[id] = version
	if command != "" {
		span, ok := e.commands[command]
		if !ok {
			span[0] = version
		}
		span[1] = version
		e.commands[command] = span
	}
	e.next = version + 1
}

func newRepeatCache(streams int) *repeatCache {
	return &repeatCache{streams: lru.New[*streamIDs](streams)}
}

// entry returns the entry of stream, making it if needed.
func (c *repeatCache) entry(stream string) *streamIDs {
	return c.streams.GetOrAdd(stream, func() *streamIDs {
		e := &streamIDs{}
		e.reset()
		return e
	})
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
		e.add(events[i].ID, first+uint64(i), events[i].Metadata.CommandID)
	}
}

// seen is what a look-up found of an append's IDs in its stream.
type seen struct {
	storekit.Repeat
	last   uint64
	exists bool
}

// lookUp finds which of the events' IDs stream holds, and the stream's
// state. It reads the events appended since the stream was last looked up
// when fresh, or when it knows nothing of the stream; otherwise it answers
// from what it knows, which is enough for an append made at the exact
// version it knows: if the stream has grown since, the server refuses that
// append, and the caller looks again, fresh.
func (s *Store) lookUp(ctx context.Context, stream string, events []eventstore.EventData, fresh bool) (seen, error) {
	e := s.repeats.entry(stream)
	e.mu.Lock()
	defer e.mu.Unlock()
	if fresh || e.next == 0 {
		if err := s.catchUp(ctx, stream, e); err != nil {
			return seen{}, err
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

// catchUp reads into e, which the caller holds locked, the events of
// stream appended since e last saw it.
func (s *Store) catchUp(ctx context.Context, stream string, e *streamIDs) error {
	for {
		read := 0
		exists, err := s.readStream(ctx, stream, e.next, false, storekit.DefaultPageSize, func(r *esdb.RecordedEvent) (bool, error) {
			read++
			if r.EventNumber < e.next {
				return true, nil
			}
			env, err := decodeEnvelope(stream, r.EventNumber, r.UserMetadata)
			if err != nil {
				return false, err
			}
			e.add(r.EventID, r.EventNumber, env.CommandID)
			return true, nil
		})
		if err != nil {
			return err
		}
		if !exists && e.next > 0 {
			e.reset() // deleted outside Cairn: what was there is gone
		}
		if read < storekit.DefaultPageSize {
			return nil
		}
	}
}
