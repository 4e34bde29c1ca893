package storekit

import (
	"context"
	"iter"
	"math"
	"reflect"
	"sync"

	"github.com/cairn-es/cairn/eventstore"
)

// StreamPageReader reads up to limit events of one stream, starting at
// version from (included), forward or backward, and stops early once the
// page is full by [PageFull] (at [MaxPageBytes]). from is at most
// math.MaxInt64, so SQL stores can bind it as a signed integer.
type StreamPageReader func(ctx context.Context, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error)

// ReadStreamPages implements [eventstore.Store.ReadStream] on a [StreamPageReader],
// the stream's counterpart of [ReadPages]: it checks the stream name, then
// reads page after page until one comes back short, holding nothing of the
// store while the consumer ranges, so memory stays flat and the consumer may
// append as it goes. [ReadStreamPagesInto] is the same on a reader that
// fills a page buffer it is lent, which spares an allocation per page.
func ReadStreamPages(ctx context.Context, stream string, opts eventstore.ReadOptions, read StreamPageReader, pageSize int) iter.Seq2[eventstore.Event, error] {
	// Its pages are the reader's: it is lent no buffer, and none is reused.
	appender := func(ctx context.Context, _ []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
		return read(ctx, stream, from, backward, limit)
	}
	return func(yield func(eventstore.Event, error) bool) {
		ReadStreamWith(ctx, stream, opts, appender, pageSize, nil, yield)
	}
}

// StreamPageAppender is a [StreamPageReader] that appends its page to dst,
// an empty buffer that [ReadStreamPagesInto] lends it, and returns it
// (grown as need be). The page it returns is ReadStreamPagesInto's to reuse
// once its events have been yielded: it is dst's memory or the reader's
// own, never memory the store still holds.
type StreamPageAppender func(ctx context.Context, dst []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error)

// ReadStreamPagesInto is [ReadStreamPages] on a [StreamPageAppender]. A
// read's pages are read into one buffer, which goes back to a pool when the
// read ends, cleared: the consumer is yielded copies of the events, and a
// read allocates no page once earlier reads have made the buffers. Loading
// an aggregate of 100 events allocated 20 KB of page before.
func ReadStreamPagesInto(ctx context.Context, stream string, opts eventstore.ReadOptions, read StreamPageAppender, pageSize int) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		buf := pagePool.Get().(*PageBuffer)
		defer giveBack(buf)
		ReadStreamWith(ctx, stream, opts, read, pageSize, buf, yield)
	}
}

// PagedStreams is implemented by a store whose ReadStream is
// [ReadStreamPagesInto] on a [StreamPageAppender]: it hands out that reader,
// so that a caller reading many streams one after another, such as an
// aggregate repository, ranges over each with [ReadStreamWith] on a page
// buffer it keeps, without a ReadStream's iterator, pooled buffer and
// allocations for every read. Reading with it must yield exactly what
// ReadStream yields; storetest checks that it does. Callers get the reader
// with [StreamPagesOf].
type PagedStreams interface {
	// StreamPages returns the reader ReadStream reads with, the page size
	// it reads at (zero or less means [DefaultPageSize]), and the store
	// whose ReadStream that is: the receiver itself.
	StreamPages() (read StreamPageAppender, pageSize int, owner eventstore.Store)
}

// StreamPagesOf returns the page reader and page size of store's
// ReadStream, when store hands them out ([PagedStreams]) and they are its
// own: a store that embeds another, such as a decorator that checks,
// filters, counts or fails reads, has its embedded store's StreamPages
// method but its own ReadStream, and is then read through its ReadStream
// (ok is false). So is a store whose StreamPages panics, such as a test
// double embedding a nil store, and one whose owner is not a pointer.
func StreamPagesOf(store eventstore.Store) (read StreamPageAppender, pageSize int, ok bool) {
	paged, ok := store.(PagedStreams)
	if !ok {
		return nil, 0, false
	}
	defer func() {
		if recover() != nil {
			read, pageSize, ok = nil, 0, false
		}
	}()
	read, pageSize, owner := paged.StreamPages()
	// Only a pointer owner is compared: two interfaces holding one struct
	// type compare its fields, which panics on a field (or a value in an
	// interface field) that cannot be compared. Of another type than
	// store's, a pointer compares unequal.
	if read == nil || owner == nil || reflect.TypeOf(owner).Kind() != reflect.Pointer || owner != store {
		return nil, 0, false
	}
	return read, pageSize, true
}

// ReadStreamWith does what ranging over ReadStreamPagesInto(ctx, stream,
// opts, read, pageSize) does with yield as the loop's body, but reads the
// pages into buf, the caller's, which it may reuse for later reads. Yielded
// events are copies, but their slices and maps may point into memory the
// buffer holds: [PageBuffer.Reset] it once done with them, so that it does
// not keep them alive. A nil buf lends read no buffer, as
// [ReadStreamPages] does.
func ReadStreamWith(ctx context.Context, stream string, opts eventstore.ReadOptions, read StreamPageAppender, pageSize int, buf *PageBuffer, yield func(eventstore.Event, error) bool) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	if err := ValidateStream(stream); err != nil {
		yield(eventstore.Event{}, err)
		return
	}
	from := opts.From
	if from > math.MaxInt64 {
		if !opts.Backward {
			return // no stream is that long
		}
		from = math.MaxInt64
	}
	remaining := opts.Limit
	for {
		size := pageSize
		if opts.Limit > 0 {
			size = min(size, remaining)
		}
		var dst []eventstore.Event
		if buf != nil {
			dst = buf.events[:0]
		}
		page, err := read(ctx, dst, stream, from, opts.Backward, size)
		if buf != nil {
			buf.keep(page)
			if err != nil {
				// A reader may fail after appending to dst (a row it
				// cannot scan, a read cut short): clear all of it.
				buf.used = cap(buf.events)
			}
		}
		if err != nil {
			yield(eventstore.Event{}, err)
			return
		}
		for _, e := range page {
			if !yield(e, nil) {
				return
			}
		}
		if opts.Limit > 0 {
			if remaining -= len(page); remaining <= 0 {
				return
			}
		}
		if !streamPageFull(page, size) {
			return
		}
		last := page[len(page)-1].Version
		switch {
		case !opts.Backward:
			from = last + 1
		case last == 0:
			return
		default:
			from = last - 1
		}
	}
}

// streamPageFull reports whether a stream page may have been cut short,
// at its size or at [MaxPageBytes]: its reader stops there (see
// [PageFull]), and the stream may go on after it.
func streamPageFull(page []eventstore.Event, size int) bool {
	bytes := 0
	for i := range page {
		bytes += PageBytes(&page[i])
	}
	return PageFull(len(page), size, bytes)
}

// PageBuffer is the page buffer of stream reads: [ReadStreamPagesInto]
// lends one from a pool to each read, and a caller of [ReadStreamWith]
// keeps its own. The zero value is an empty buffer; it is not safe for
// concurrent use.
type PageBuffer struct {
	events []eventstore.Event
	// used is the length of the longest page read into events since the
	// last Reset: what Reset clears.
	used int
}

// pagePool holds the page buffers of finished stream reads.
var pagePool = sync.Pool{New: func() any { return new(PageBuffer) }}

// maxPooledPage is the capacity beyond which a page buffer is dropped
// rather than kept: twice the default page size.
const maxPooledPage = 2 * DefaultPageSize

// giveBack resets b and pools it.
func giveBack(b *PageBuffer) {
	b.Reset()
	pagePool.Put(b)
}

// keep makes page, the reader's last, the buffer of the next: its capacity
// is at least that of every earlier page.
func (b *PageBuffer) keep(page []eventstore.Event) {
	if cap(page) >= cap(b.events) {
		b.events = page[:0]
	}
	b.used = max(b.used, len(page))
}

// Reset clears what reads left in b, so that no event's data stays alive
// in it, and drops its memory when a long page grew it past twice
// [DefaultPageSize].
func (b *PageBuffer) Reset() {
	clear(b.events[:b.used])
	b.used = 0
	if cap(b.events) > maxPooledPage {
		b.events = nil
	}
}
