package storekit

import (
	"context"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// Page is one read of a store's global log, the primitive on which
// [ReadPages] and [Follow] build ReadAll and Subscribe for every store.
type Page struct {
	// Events are the matching events after the read's start, in position
	// order, at most the read's limit.
	Events []eventstore.Event
	// Through is the position through which the read looked: every matching
	// event after the read's start, up to and including Through, is in
	// Events. When the page is Full, Through is the last event's position;
	// otherwise it is the end of the log as the read saw it.
	Through eventstore.Position
	// Full reports a read that stopped at its limit of events, or at
	// [MaxPageBytes]: more events may follow Through.
	Full bool
}

// MaxPageBytes bounds what one page read holds: a reader stops adding
// events to a page once their data and metadata reach it (a page holds at
// least one event), so that a reader of large events holds a few MiB at a
// time, not DefaultPageSize events of up to [MaxEventSize] each.
const MaxPageBytes = 4 << 20

// PageBytes counts e against [MaxPageBytes]: its data and metadata, as
// [MaxEventSize] counts them.
func PageBytes(e *eventstore.Event) int { return EventSize(&e.EventData) }

// PageFull reports whether a page of n events holding size bytes (the sum
// of their [PageBytes]) is full under a limit of limit events: a page
// reader stops adding events once it is, and marks the page Full.
func PageFull(n, limit, size int) bool { return n >= limit || size >= MaxPageBytes }

// PageReader reads one [Page] of at most limit events after position after.
type PageReader func(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (Page, error)

// DefaultPageSize is the number of events a page read asks for when the
// caller does not say.
const DefaultPageSize = 512

// ReadPages implements [eventstore.Store.ReadAll] on a [PageReader]: it checks the
// filter (see [eventstore.Filter.Validate]), then reads page after page until one
// comes back not Full, so memory stays flat however long the log is and
// however large its events.
func ReadPages(ctx context.Context, after eventstore.Position, filter eventstore.Filter, read PageReader, pageSize int) iter.Seq2[eventstore.Event, error] {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return func(yield func(eventstore.Event, error) bool) {
		if err := filter.Validate(); err != nil {
			yield(eventstore.Event{}, err)
			return
		}
		for {
			page, err := read(ctx, after, filter, pageSize)
			if err != nil {
				yield(eventstore.Event{}, err)
				return
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
			if !page.Full || !after.Before(page.Through) {
				return
			}
			after = page.Through
		}
	}
}

// FollowOptions tells [Follow] how to learn that a store has new events.
// The zero value polls every [DefaultPollInterval].
type FollowOptions struct {
	// PageSize is the number of events read at a time; zero means
	// [DefaultPageSize].
	PageSize int
	// Changed, when set, returns a channel that is closed at the next commit
	// (see [Notifier]). Follow takes it before each read, so a commit that
	// lands during the read still wakes it.
	Changed func() <-chan struct{}
	// PollInterval bounds how long Follow waits without a wake-up before it
	// reads again, to see commits that Changed cannot report (another
	// process's). Zero means [DefaultPollInterval] without Changed and no
	// polling with it.
	PollInterval time.Duration
	// Closed is closed when the store closes; Follow then yields [eventstore.ErrClosed].
	Closed <-chan struct{}
	// Transient reports read errors worth retrying (a dropped connection).
	// Follow logs them, waits PollInterval (or one second) and reads again
	// from where it was. Other errors end the subscription.
	Transient func(error) bool
	// Logger receives transient read errors; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultPollInterval is how often [Follow] polls a store that cannot wake
// it.
const DefaultPollInterval = 100 * time.Millisecond

// Follow implements [eventstore.Store.Subscribe] on a [PageReader]: it checks the
// filter (see [eventstore.Filter.Validate]), then reads pages until it is caught up,
// then waits for a wake-up, a poll tick, the end of ctx or the store's
// closing, and reads again from the last position it looked through. It never skips an event that the reader's pages report.
func Follow(ctx context.Context, after eventstore.Position, filter eventstore.Filter, read PageReader, opts FollowOptions) iter.Seq2[eventstore.Event, error] {
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	poll := opts.PollInterval
	if poll <= 0 && opts.Changed == nil {
		poll = DefaultPollInterval
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return func(yield func(eventstore.Event, error) bool) {
		if err := filter.Validate(); err != nil {
			yield(eventstore.Event{}, err)
			return
		}
		var timer *time.Timer
		if poll > 0 {
			timer = time.NewTimer(poll)
			defer timer.Stop()
		}
		for {
			var wake <-chan struct{}
			if opts.Changed != nil {
				wake = opts.Changed()
			}
			page, err := read(ctx, after, filter, pageSize)
			caughtUp := true
			switch {
			case err != nil && ctx.Err() != nil:
				yield(eventstore.Event{}, ctx.Err())
				return
			case err != nil && opts.Transient != nil && opts.Transient(err):
				logger.WarnContext(ctx, "eventstore: subscription read failed; retrying",
					slog.String("position", after.String()), slog.Any("error", err))
				wake = nil // wait for the timer, not a commit, before retrying
			case err != nil:
				yield(eventstore.Event{}, err)
				return
			default:
				for _, e := range page.Events {
					if !yield(e, nil) {
						return
					}
				}
				if after.Before(page.Through) {
					after = page.Through
				}
				caughtUp = !page.Full
			}
			if !caughtUp {
				if ctx.Err() != nil {
					yield(eventstore.Event{}, ctx.Err())
					return
				}
				continue
			}
			var tick <-chan time.Time
			if timer != nil {
				timer.Reset(poll)
				tick = timer.C
			} else if wake == nil {
				tick = time.After(time.Second)
			}
			select {
			case <-ctx.Done():
				yield(eventstore.Event{}, ctx.Err())
				return
			case <-opts.Closed:
				yield(eventstore.Event{}, eventstore.ErrClosed)
				return
			case <-wake:
			case <-tick:
			}
		}
	}
}

// Notifier wakes subscribers when a store commits, without polling: each
// waiter takes the channel of the next commit and blocks on it; Notify closes
// it and starts a new one. A slow subscriber never holds up a writer. The
// zero value is ready to use.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel that is closed at the next [Notifier.Notify].
func (n *Notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes everyone waiting on a channel from [Notifier.Changed].
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
