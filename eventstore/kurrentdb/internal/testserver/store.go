package testserver

import (
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
)

// KurrentDB's sentinel numbers, as the server's ExpectedVersion and
// EventNumber use them. The store keeps them so that the commit check below
// reads like the server's IndexWriter.CheckCommit it imitates.
const (
	expectAny          int64 = -2
	expectNoStream     int64 = -1
	expectStreamExists int64 = -4

	// noEvents is the last event number of a stream without events.
	noEvents int64 = -1
	// deletedStream is EventNumber.DeletedStream: the number of a tombstone,
	// and the $tb a soft delete writes.
	deletedStream int64 = math.MaxInt64
)

// The imaginary transaction file: every record takes room, so positions are
// byte offsets with gaps, never 0, 1, 2. An adapter that assumes dense
// positions, or that a position plus one is the next event, fails here as it
// would on a real server.
const (
	firstOffset      uint64 = 4096 // the epoch and chunk header come first
	recordOverhead   uint64 = 96
	commitRecordSize uint64 = 48
)

// position is a place in $all, compared lexicographically like the
// server's TFPos.
type position struct{ commit, prepare uint64 }

func (p position) less(q position) bool {
	return p.commit < q.commit || p.commit == q.commit && p.prepare < q.prepare
}

// record is one stored event. Records never change once written, so readers
// may use them without the store's lock.
type record struct {
	stream  string
	rev     int64 // deletedStream for a tombstone
	id      uuid.UUID
	typ     string
	json    bool // KurrentDB keeps only "is JSON", not the content type
	data    []byte
	meta    []byte
	created int64 // 100 ns ticks since the Unix epoch
	pos     position
}

// proposed is one event of an append request, validated.
type proposed struct {
	id   uuid.UUID
	typ  string
	json bool
	data []byte
	meta []byte
}

// stream holds one stream's events by number. A stream may exist with no
// events when only its metadata was set.
type stream struct {
	name      string
	events    []*record // events[n] has number n
	tombstone *record
	meta      streamMeta // from the last event of $$name
	rawMeta   []byte
}

// idRef says where an event ID was last written: the server's
// _committedEvents cache, without its size limit.
type idRef struct {
	stream string
	rev    int64
}

// store is the log. Writers hold mu; readers hold it only to take a snapshot
// of a slice header, then read records without it: slices only grow, and
// records are immutable.
type store struct {
	now        func() time.Time
	statsEvery int

	mu      sync.RWMutex
	all     []*record
	streams map[string]*stream
	ids     map[uuid.UUID]idRef
	offset  uint64
	appends int
	// changed is closed and replaced after every write, waking subscriptions.
	changed chan struct{}
}

func newStore(now func() time.Time, statsEvery int) *store {
	st := &store{
		now:        now,
		statsEvery: statsEvery,
		streams:    make(map[string]*stream),
		ids:        make(map[uuid.UUID]idRef),
		offset:     firstOffset,
		changed:    make(chan struct{}),
	}
	if statsEvery > 0 {
		st.mu.Lock()
		st.startupNoiseLocked()
		st.mu.Unlock()
	}
	return st
}

// lastNumberLocked is the server's GetStreamLastEventNumber: -1 for no
// events, deletedStream once tombstoned, and a soft-deleted stream keeps its
// last number.
func (st *store) lastNumberLocked(name string) int64 {
	s := st.streams[name]
	switch {
	case s == nil:
		return noEvents
	case s.tombstone != nil:
		return deletedStream
	}
	return int64(len(s.events)) - 1
}

func (st *store) ensureLocked(name string) *stream {
	s := st.streams[name]
	if s == nil {
		s = &stream{name: name, meta: defaultMeta(name)}
		st.streams[name] = s
	}
	return s
}

// writeLocked appends events to a stream whose last number is cur, giving
// them the next numbers and fresh positions. One event is written the way a
// modern server writes it (commit == prepare); several share one commit
// record with increasing prepares, as an explicit transaction does. Both are
// legal, and the second exercises an adapter's lexicographic comparison.
func (st *store) writeLocked(name string, cur int64, evs []proposed) []*record {
	if len(evs) == 0 {
		return nil
	}
	s := st.ensureLocked(name)
	created := st.now().UnixNano() / 100
	recs := make([]*record, len(evs))
	for i, e := range evs {
		recs[i] = &record{
			stream: name, rev: cur + 1 + int64(i), id: e.id, typ: e.typ, json: e.json,
			data: e.data, meta: e.meta, created: created,
			pos: position{prepare: st.offset},
		}
		st.offset += recordOverhead + uint64(len(name)+len(e.typ)+len(e.data)+len(e.meta))
	}
	commit := recs[0].pos.prepare
	if len(recs) > 1 {
		commit = st.offset
		st.offset += commitRecordSize
	}
	for _, r := range recs {
		r.pos.commit = commit
		s.events = append(s.events, r)
		st.all = append(st.all, r)
		st.ids[r.id] = idRef{stream: name, rev: r.rev}
	}
	if orig, ok := metastreamOf(name); ok {
		st.metaWrittenLocked(orig, recs[len(recs)-1].data)
	}
	return recs
}

// systemWriteLocked writes one JSON event without a version check, as the
// server's own writers do (metadata of a delete, $stats).
func (st *store) systemWriteLocked(name, typ string, data []byte) *record {
	return st.writeLocked(name, st.lastNumberLocked(name), []proposed{{
		id: uuid.New(), typ: typ, json: true, data: data, meta: []byte{},
	}})[0]
}

// forgetIDs empties the ID cache, as a node restart or its eviction does.
func (st *store) forgetIDs() {
	st.mu.Lock()
	defer st.mu.Unlock()
	clear(st.ids)
}

// publishLocked wakes every subscription waiting for a write.
func (st *store) publishLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// allView returns $all as it is now, and the channel closed by the next write.
func (st *store) allView() ([]*record, <-chan struct{}) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.all[:len(st.all):len(st.all)], st.changed
}

// streamView is a stream as a reader sees it at one moment.
type streamView struct {
	found   bool // false: the server answers StreamNotFound
	deleted bool // tombstoned: the server answers stream-deleted
	events  []*record
	first   int64 // lowest readable number ($tb, $maxCount)
	last    int64 // last number, even when soft-deleted; -1 for none
}

func (st *store) streamView(name string) (streamView, <-chan struct{}) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	s := st.streams[name]
	if s == nil {
		return streamView{last: noEvents}, st.changed
	}
	n := len(s.events)
	v := streamView{last: int64(n) - 1}
	switch {
	case s.tombstone != nil:
		v.found, v.deleted = true, true
	case n > 0 && !s.meta.softDeleted():
		v.found, v.events, v.first = true, s.events[:n:n], s.meta.firstReadable(v.last)
	}
	return v, st.changed
}
