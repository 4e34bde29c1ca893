package storekit

import (
	"context"
	"iter"
	"math"

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
// append as it goes.
func ReadStreamPages(ctx context.Context, stream string, opts eventstore.ReadOptions, read StreamPageReader, pageSize int) iter.Seq2[eventstore.Event, error] {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return func(yield func(eventstore.Event, error) bool) {
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
			page, err := read(ctx, stream, from, opts.Backward, size)
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
