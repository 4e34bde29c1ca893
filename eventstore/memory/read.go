package memory

import (
	"context"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Reads copy events out a page at a time. A page is measured first (how
// many events, how many bytes of data), then made at its size: the page
// in one allocation, and the data of all its events in one array, each
// event's capped at its length, so that a reader that appends to one
// event's data cannot reach the next. Copying each event's data on its
// own, and growing the page by appending, were most of a read's
// allocations. A reader that keeps one event's data keeps its page's
// array, a few hundred events' worth at most.

// streamPage copies up to limit events of a stream, starting at version
// from.
func (s *Store) streamPage(ctx context.Context, page []eventstore.Event, name string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, eventstore.ErrClosed
	}
	st := s.streams.get(name)
	if st == nil {
		return nil, nil
	}
	n := uint64(len(st.entries))
	// The versions to visit: first, first+step, ..., count of them.
	first, step, count := from, 1, n-min(from, n)
	if backward {
		first, step = min(from, n-1), -1
		count = first + 1
	}
	if limit > 0 {
		count = min(count, uint64(limit))
	}
	at := func(j int) *eventstore.Event {
		return s.log.at(st.entries[int(first)+j*step])
	}
	take, data, size := 0, 0, 0
	for take < int(count) {
		e := at(take)
		take++
		data += len(e.Data)
		size += storekit.PageBytes(e)
		if storekit.PageFull(take, limit, size) {
			break
		}
	}
	page = slices.Grow(page, take)[:take]
	buf := make([]byte, 0, data)
	for j := range page {
		buf = copyOut(&page[j], at(j), buf)
	}
	return page, nil
}

func (s *Store) readPage(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (storekit.Page, error) {
	if err := ctx.Err(); err != nil {
		return storekit.Page{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storekit.Page{}, eventstore.ErrClosed
	}
	// Positions are dense, {Major: index+1}: the first event after any
	// position {m, minor} is {m+1, 0}, at index m, whatever minor is.
	start := int(min(after.Major, uint64(s.log.n)))
	page := storekit.Page{Through: after}
	// end is the index after the page's last event.
	end, take, data, size := s.log.n, 0, 0, 0
	for i := start; i < s.log.n; i++ {
		e := s.log.at(i)
		if !filter.Match(e) {
			continue
		}
		take++
		data += len(e.Data)
		size += storekit.PageBytes(e)
		if storekit.PageFull(take, limit, size) {
			end = i + 1
			page.Through, page.Full = e.Position, true
			break
		}
	}
	if take > 0 {
		page.Events = make([]eventstore.Event, 0, take)
		buf := make([]byte, 0, data)
		for i := start; i < end; i++ {
			if e := s.log.at(i); filter.Match(e) {
				page.Events = append(page.Events, eventstore.Event{})
				buf = copyOut(&page.Events[len(page.Events)-1], e, buf)
			}
		}
	}
	if !page.Full && s.log.n > 0 && after.Before(s.log.last().Position) {
		page.Through = s.log.last().Position
	}
	return page, nil
}

// copyOut sets *dst to a copy of stored event e that shares no memory with
// it, its data appended to buf, which has room for it; it returns buf.
func copyOut(dst, e *eventstore.Event, buf []byte) []byte {
	*dst = *e
	start := len(buf)
	buf = append(buf, e.Data...)
	dst.Data = buf[start:len(buf):len(buf)]
	dst.Metadata = e.Metadata.Clone()
	return buf
}
