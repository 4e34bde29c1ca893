package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/projection"
)

// DefaultWorkers is how many instances a runner steps at once by default.
const DefaultWorkers = 64

// start makes the runner's consumers, once: two per segment.
func (r *Runner[S]) start() (*consumers, error) {
	r.startOnce.Do(func() {
		opts := r.opts
		checkpoints := r.checkpoints()
		if checkpoints == nil {
			r.startErr = &SetupError{Saga: r.e.t.name, Reason: "no checkpoint store: the event store is none, and RunnerOptions.Checkpoints is nil"}
			return
		}
		if opts.DeadLetters == nil {
			opts.DeadLetters, _ = checkpoints.(eventstore.DeadLetterStore)
		}
		r.deadLetters = opts.DeadLetters
		popts := projection.Options{BatchSize: opts.BatchSize, MaxBatchDelay: opts.MaxBatchDelay, Leases: opts.Leases,
			LeaseTTL: opts.LeaseTTL, Holder: opts.Holder, Logger: r.e.log, StatsInterval: -1}
		eventsFilter := eventstore.Filter{Types: r.e.t.eventTypes()}
		recordsFilter := eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
		c := &consumers{}
		for k := range r.segments {
			seg := &segment{}
			events, outbox := r.segmentNames(k)
			eopts, oopts := popts, popts
			eopts.Filter, oopts.Filter = eventsFilter, recordsFilter
			if opts.Leases != nil {
				// A former holder of the outbox's lease may have set
				// deadlines that this process never read: read them once
				// the checkpoint is ours.
				oopts.OnClaim = func(ctx context.Context, from eventstore.Position) error { return r.claimedOutbox(ctx, k, from) }
			}
			var err error
			if seg.events, err = projection.NewBatch(events, r.e.store, checkpoints,
				func(ctx context.Context, evs []eventstore.Event) error { return r.handleEvents(ctx, k, evs) }, eopts); err != nil {
				r.startErr = err
				return
			}
			if seg.outbox, err = projection.NewBatch(outbox, r.e.store, checkpoints,
				func(ctx context.Context, evs []eventstore.Event) error { return r.handleRecords(ctx, k, evs) }, oopts); err != nil {
				r.startErr = err
				return
			}
			c.segs = append(c.segs, seg)
		}
		r.consumers.Store(c)
	})
	return r.consumers.Load(), r.startErr
}

// checkpoints returns where the runner's consumers keep their checkpoints,
// or nil for nowhere.
func (r *Runner[S]) checkpoints() eventstore.CheckpointStore {
	if r.opts.Checkpoints != nil {
		return r.opts.Checkpoints
	}
	c, _ := r.e.store.(eventstore.CheckpointStore)
	return c
}

// EventsConsumer is the name of the consumer of the events the saga maps:
// its checkpoint and lease are stored under it (for a runner of several
// segments, see [Runner.SegmentConsumers]), and the dead letters of stored
// events that map to no instance, whatever the segments.
func (r *Runner[S]) EventsConsumer() string { return StreamPrefix + r.e.t.name }

// OutboxConsumer is the name of the consumer of the saga's step records,
// which sends their commands (for a runner of several segments, see
// [Runner.SegmentConsumers]).
func (r *Runner[S]) OutboxConsumer() string { return StreamPrefix + r.e.t.name + ":outbox" }

// Run runs the saga until ctx ends, then returns nil: it hands every
// stored event the saga maps to its instance (instances in parallel, each
// one's events in order), sends the commands the steps record, and fires
// deadlines when they are due. It first reads the pending deadlines of
// every instance from their latest steps (with a lease store, each time
// an outbox consumer takes its lease, as its former holder may have set
// some since). An error of the event store that outlasts the retries is
// returned.
//
// With several segments and a lease store, Run takes a member lease and
// runs its share of the segments, which it gives up to processes that join
// and takes over from processes that die (see [RunnerOptions.Segments]);
// it fires the deadlines of the instances in its share only.
func (r *Runner[S]) Run(ctx context.Context) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	if r.opts.Leases == nil {
		// With leases, each outbox consumer reads them once it holds its
		// segment.
		if err := r.loadDeadlines(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runs := &segmentRuns{ctx: ctx, fail: cancel, segs: c.segs, on: make(map[int]*running),
		set: r.setActive, report: func(held []int) { r.held.Store(&held) }}
	shared := r.opts.Leases != nil && r.segments > 1
	if shared {
		for k := range r.segments {
			r.setActive(k, false) // until this process holds it
		}
	}
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{r.fireWhenDue, r.watchGaps} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				cancel(err)
			}
		}()
	}
	if shared {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.claimSegments(ctx, runs)
		}()
	} else {
		runs.assign(all(r.segments))
	}
	wg.Wait()
	runs.wait()
	r.held.Store(nil)
	for k := range r.segments {
		// FireDue and CatchUp outside Run fire every segment's deadlines;
		// claiming a segment reads its deadlines again.
		r.setActive(k, true)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// CatchUp handles everything stored when it is called, and what that
// causes, then returns: the events the saga maps, the commands their steps
// send (and the rejections those are fed back as), until nothing is left;
// then it fires the deadlines due at the runner's clock. Tests drive a
// saga with it and a clock they move. It catches up every segment, one
// after the other, each under its lease when there is a lease store.
func (r *Runner[S]) CatchUp(ctx context.Context) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	if r.opts.Leases == nil {
		if err := r.loadDeadlines(ctx); err != nil {
			return err
		}
	}
	for {
		// Deadlines fire only once the events and the commands they cause
		// are quiet, so that one due at T never overtakes an event stored
		// before T.
		for {
			for _, seg := range c.segs {
				if err := seg.events.CatchUp(ctx); err != nil {
					return err
				}
			}
			before := r.sent.Load()
			for _, seg := range c.segs {
				if err := seg.outbox.CatchUp(ctx); err != nil {
					return err
				}
			}
			if r.sent.Load() == before {
				break
			}
		}
		fired, err := r.FireDue(ctx)
		if err != nil || fired == 0 {
			return err
		}
	}
}

// handleEvents is the batch handler of segment k's events consumer: it
// finds each event's instance, then steps the instances of segment k in
// parallel, each one's events in order. An event that reaches no instance
// is segment 0's to park.
func (r *Runner[S]) handleEvents(ctx context.Context, k int, events []eventstore.Event) error {
	var order []string
	groups := make(map[string][]*message)
	for _, ev := range events {
		id, msg, problem := r.storedMessage(ev)
		switch {
		case problem != nil:
			if k != 0 {
				continue
			}
			if err := r.park(ctx, ev, "", problem); err != nil {
				return err
			}
			continue
		case msg == nil:
			if k == 0 {
				r.e.stats.count(ignored)
			}
			continue // an upcaster turned it into types the saga does not map
		case Segment(id, r.segments) != k:
			continue // another segment's consumer steps it
		}
		if groups[id] == nil {
			order = append(order, id)
		}
		groups[id] = append(groups[id], msg)
	}
	return r.parallel(ctx, order, func(ctx context.Context, id string) error {
		for _, msg := range groups[id] {
			if _, err := r.e.process(ctx, id, msg); err != nil {
				return err
			}
		}
		return nil
	})
}

// handleRecords is the batch handler of segment k's outbox: it sends the
// commands of each step record of an instance of segment k, instances in
// parallel and each one's records in order, and tells the deadline index
// what each record leaves pending.
func (r *Runner[S]) handleRecords(ctx context.Context, k int, events []eventstore.Event) error {
	var order []string
	groups := make(map[string][]eventstore.Event)
	for _, ev := range events {
		id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
		if !ok || ev.Type != recordType || Segment(id, r.segments) != k {
			continue
		}
		if groups[id] == nil {
			order = append(order, id)
		}
		groups[id] = append(groups[id], ev)
	}
	err := r.parallel(ctx, order, func(ctx context.Context, id string) error {
		for _, ev := range groups[id] {
			if err := r.sendRecord(ctx, id, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && r.opts.Leases != nil && len(events) > 0 {
		// The session read on from its claim, where the index was whole.
		r.timers.cover(k, events[len(events)-1].Position)
	}
	return err
}

// parallel runs fn for each ID, at most Workers at once, and returns the
// first error.
func (r *Runner[S]) parallel(ctx context.Context, ids []string, fn func(ctx context.Context, id string) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, r.workers)
	var wg sync.WaitGroup
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, id); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// park keeps a stored event that cannot reach an instance (it does not
// decode, or its mapping finds no instance) as a dead letter of the events
// consumer, so that an operator sees it; the events after it go on.
func (r *Runner[S]) park(ctx context.Context, ev eventstore.Event, id string, cause error) error {
	herr := &HandlerError{Saga: r.e.t.name, Instance: id, Attempts: 1, Err: cause,
		Message: fmt.Sprintf("event %s #%d of %q", ev.Type, ev.Version, ev.StreamID)}
	r.e.log.WarnContext(ctx, "saga: an event reaches no instance; parked as a dead letter", slog.String("saga", r.e.t.name),
		slog.String("stream", ev.StreamID), slog.Uint64("version", ev.Version), slog.String("type", ev.Type), slog.Any("error", cause))
	r.e.stats.count(parkedOut)
	if r.deadLetters == nil {
		return herr
	}
	now := time.Now().UTC()
	_, err := r.deadLetters.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: r.EventsConsumer(), Event: ev,
		Error: herr.Error(), Attempts: 1, FirstFailure: now, LastFailure: now})
	return err
}

// loadDeadlines fills the deadline and gap indexes from the latest step
// of every instance, read from the store, once.
func (r *Runner[S]) loadDeadlines(ctx context.Context) error {
	r.loadOnce.Lock()
	defer r.loadOnce.Unlock()
	if r.loaded {
		return nil
	}
	if err := r.scanDeadlines(ctx); err != nil {
		return err
	}
	r.loaded = true
	return nil
}

// claimedOutbox makes the deadline index whole for segment k, whose
// outbox consumer has claimed its checkpoint at from: the records up to
// from are not read again, and a former holder of the lease may have set
// deadlines in them that this process never saw. Unless this process ran
// the outbox that far itself (it lost its lease and took it back, say), it
// reads the deadlines again.
func (r *Runner[S]) claimedOutbox(ctx context.Context, k int, from eventstore.Position) error {
	if r.timers.covered(k, from) {
		return nil
	}
	if err := r.reloadDeadlines(ctx); err != nil {
		return err
	}
	r.timers.cover(k, from)
	return nil
}

// reloadDeadlines reads the deadlines of every instance of the active
// segments again, for a consumer that has just claimed its checkpoint:
// the scan starts after the claim, so it sees every record up to the
// checkpoint. Claims that ask at once share one scan, and a store error
// is retried as a handler's failure is.
func (r *Runner[S]) reloadDeadlines(ctx context.Context) error {
	want := r.reloads.asked.Add(1)
	r.reloads.mu.Lock()
	defer r.reloads.mu.Unlock()
	if r.reloads.done >= want {
		return nil // a scan that started after this claim has run
	}
	covered := r.reloads.asked.Load()
	for attempt := 1; ; attempt++ {
		err := r.scanDeadlines(ctx)
		if err == nil {
			r.reloads.done = covered
			return nil
		}
		if ctx.Err() != nil || attempt >= r.e.attempts {
			return err
		}
		r.e.log.WarnContext(ctx, "saga: reading the pending deadlines failed; retrying", slog.String("saga", r.e.t.name), slog.Any("error", err))
		if err := backoff.Wait(ctx, r.e.retry.Delay(attempt)); err != nil {
			return err
		}
	}
}

// scanDeadlines reads the saga's step records once and tells the deadline
// and gap indexes what the latest step of each instance of an active
// segment leaves pending.
func (r *Runner[S]) scanDeadlines(ctx context.Context) error {
	f := eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
	latest := make(map[string]*record)
	versions := make(map[string]uint64)
	for ev, err := range r.e.store.ReadAll(ctx, eventstore.Start, f) {
		if err != nil {
			return err
		}
		id, _ := strings.CutPrefix(ev.StreamID, r.e.t.Category())
		if !r.timers.isActive(Segment(id, r.segments)) {
			continue // another process fires them
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return err
		}
		if len(rec.Deadlines) == 0 && len(rec.Held) == 0 {
			delete(latest, id)
			continue
		}
		latest[id], versions[id] = rec, ev.Version
	}
	for id, rec := range latest {
		r.observe(id, versions[id], rec)
	}
	return nil
}

// fireWhenDue fires deadlines as they fall due, waiting on one timer for
// the earliest, until ctx ends. Before firing, it lets the events consumers
// handle what was stored (see settle).
func (r *Runner[S]) fireWhenDue(ctx context.Context) error {
	failures := 0
	for {
		at, changed := r.timers.next()
		var due <-chan time.Time
		if !at.IsZero() {
			due = r.e.clock.After(max(at.Sub(r.e.now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-due:
			err := r.settle(ctx)
			if err == nil {
				_, err = r.FireDue(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failures++
				r.e.log.WarnContext(ctx, "saga: firing deadlines failed; retrying", slog.String("saga", r.e.t.name), slog.Any("error", err))
				if err := backoff.Wait(ctx, r.e.retry.Delay(failures)); err != nil {
					return nil
				}
				continue
			}
			failures = 0
		}
	}
}
