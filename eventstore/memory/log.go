package memory

import (
	"hash/maphash"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// chunkBits sizes the log's chunks: 1<<chunkBits events each (about
// 90 KiB).
const chunkBits = 9

const chunkLen = 1 << chunkBits

// eventLog is the store's log, event i (position {Major: i+1}) at
// chunks[i>>chunkBits][i%chunkLen]. Its chunks are of a fixed size, so a
// growing log never copies what it holds: one slice doubling at each
// growth copied every event so far, and left the old arrays for the
// collector to scan, which was a quarter of an append's time. Only the
// first chunk grows by appending, up to chunkLen, so that a store that
// holds a few events stays small.
type eventLog struct {
	chunks [][]eventstore.Event
	n      int
}

// at returns the event at index i < l.n, in place.
func (l *eventLog) at(i int) *eventstore.Event {
	return &l.chunks[i>>chunkBits][i&(chunkLen-1)]
}

// last returns the newest event, in place; the log is not empty.
func (l *eventLog) last() *eventstore.Event { return l.at(l.n - 1) }

// add appends a zero event and returns it, in place, for the caller to
// fill; its index is l.n-1.
func (l *eventLog) add() *eventstore.Event {
	k := len(l.chunks) - 1
	if k < 0 || len(l.chunks[k]) == chunkLen {
		capacity := chunkLen
		if k < 0 {
			capacity = 8
		}
		l.chunks = append(l.chunks, make([]eventstore.Event, 0, capacity))
		k++
	}
	c := &l.chunks[k]
	*c = append(*c, eventstore.Event{})
	l.n++
	return &(*c)[len(*c)-1]
}

// dataBlock is the size of the blocks that hold the events' payloads
// (but for the first few, which grow to it from firstDataBlock), and
// largeData the size from which a payload has memory of its own.
const (
	dataBlock      = 64 << 10
	firstDataBlock = 512
	largeData      = dataBlock / 8
)

// dataBlocks holds the payloads of the log's events: each is copied into
// the current block, which a new one follows when it is full. An array per
// append was an allocation per append, and an object per append held for
// the collector to mark at every cycle. A block wastes less than largeData
// at its end; the store never drops an event, so no block outlives its
// events.
type dataBlocks struct {
	block []byte
}

// copy returns a copy of data, capped at its length so that an append to
// it cannot reach the next; an empty payload stays empty and non-nil.
func (b *dataBlocks) copy(data []byte) []byte {
	if len(data) >= largeData {
		return append(make([]byte, 0, len(data)), data...)
	}
	if cap(b.block)-len(b.block) < len(data) || b.block == nil {
		// Blocks grow to their size, so that a store of a few events
		// stays small.
		b.block = make([]byte, 0, max(nextSlab(cap(b.block), firstDataBlock, dataBlock), len(data)))
	}
	start := len(b.block)
	b.block = append(b.block, data...)
	return b.block[start:len(b.block):len(b.block)]
}

// nextSlab is the size of the slab that follows one of size prev: twice
// as large, from first up to limit, so that a store that holds little
// stays small and one that holds much makes few slabs.
func nextSlab(prev, first, limit int) int { return min(max(2*prev, first), limit) }

// idScan is the longest stream whose event IDs an append looks for by
// comparing them one by one; a longer one keeps a map. Most streams (an
// aggregate's) stay short, and a map per stream was an allocation for
// every new stream and one more as it grew.
const idScan = 32

// stream is one stream's index into the log.
type stream struct {
	name    string
	entries []int                // indexes into Store.log, one per stream version
	ids     map[uuid.UUID]uint64 // versions by event ID, past idScan entries; nil before
	next    *stream              // the next stream whose name has the same hash
	inline  [2]int               // entries' first array, allocated with the stream
}

// streamIndex finds streams by name. Its map is keyed by the name's hash,
// so that growing it rehashes 8-byte keys in place: a map keyed by the
// names re-read every name at each growth, which was most of the cost of
// adding a stream once there were a few hundred thousand. Streams whose
// names share a hash (a random seed's 64 bits: next to never) are chained.
type streamIndex struct {
	seed maphash.Seed
	m    map[uint64]*stream
	// slab is where the next streams are made: an array made for up to
	// streamSlab of them at a time, not one allocation per stream (a
	// store never drops a stream, so no slab is kept alive for nothing).
	slab []stream
}

// streamSlab is how many streams one slab holds (about 10 KiB).
const streamSlab = 128

func newStreamIndex() streamIndex {
	return streamIndex{seed: maphash.MakeSeed(), m: make(map[uint64]*stream)}
}

// hash returns the key of a stream name.
func (x *streamIndex) hash(name string) uint64 { return maphash.String(x.seed, name) }

// find returns the stream of a name whose key is h, or nil, and the
// chain of streams of key h, which add takes.
func (x *streamIndex) find(h uint64, name string) (found, chain *stream) {
	chain = x.m[h]
	for st := chain; st != nil; st = st.next {
		if st.name == name {
			return st, chain
		}
	}
	return nil, chain
}

// get returns the stream of a name, or nil.
func (x *streamIndex) get(name string) *stream {
	st, _ := x.find(x.hash(name), name)
	return st
}

// add returns a new empty stream of a name whose key is h, which find
// does not hold; chain is what find returned with it (taken from find
// rather than looked up again: a new stream's append made three lookups).
func (x *streamIndex) add(h uint64, name string, chain *stream) *stream {
	if len(x.slab) == cap(x.slab) {
		// Slabs grow to their size, so that a store of a few streams
		// stays small.
		x.slab = make([]stream, 0, nextSlab(cap(x.slab), 4, streamSlab))
	}
	x.slab = x.slab[:len(x.slab)+1]
	st := &x.slab[len(x.slab)-1]
	st.name, st.next = name, chain
	st.entries = st.inline[:0]
	x.m[h] = st
	return st
}

// all yields every stream.
func (x *streamIndex) all(yield func(*stream) bool) {
	for _, st := range x.m {
		for ; st != nil; st = st.next {
			if !yield(st) {
				return
			}
		}
	}
}

// version returns the version at which st holds event ID id.
func (st *stream) version(l *eventLog, id uuid.UUID) (uint64, bool) {
	if st.ids != nil {
		v, ok := st.ids[id]
		return v, ok
	}
	for v, i := range st.entries {
		if l.at(i).ID == id {
			return uint64(v), true
		}
	}
	return 0, false
}

// add records that the event at index i of l is st's next version.
func (st *stream) add(l *eventLog, i int) {
	st.entries = append(st.entries, i)
	switch {
	case st.ids != nil:
		st.ids[l.at(i).ID] = uint64(len(st.entries) - 1)
	case len(st.entries) > idScan:
		st.ids = make(map[uuid.UUID]uint64, 2*len(st.entries))
		for v, j := range st.entries {
			st.ids[l.at(j).ID] = uint64(v)
		}
	}
}
