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
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/projection"
)

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
			opts.DeadLetters, _ = checkpoints.(storekit.DeadLetterStore)
		}
		r.deadLetters = opts.DeadLetters
		popts := projection.Options{BatchSize: opts.BatchSize, MaxBatchDelay: opts.MaxBatchDelay, Leases: opts.Leases,
			LeaseTTL: opts.LeaseTTL, Holder: opts.Holder, Logger: r.e.log, NoStatsLog: true,
			TracerProvider: opts.TracerProvider, MeterProvider: opts.MeterProvider}
		eventsFilter, recordsFilter := r.eventsFilter(), recordsFilter(r.e.t.name)
		c := &consumers{}
		for k := range r.segments {
			seg := &segment{external: opts.ExternalEvents}
			events, outbox := r.segmentNames(k)
			eopts, oopts := popts, popts
			eopts.Filter, oopts.Filter = eventsFilter, recordsFilter
			// The records up to the checkpoint this session claims are not
			// read again, and another process (the former holder of the
			// lease, or without leases the other runner that moved the
			// checkpoint) may have set deadlines there that this one never
			// read: read them once the checkpoint is ours.
			claimed := func(ctx context.Context, from eventstore.Position) error { return r.claimedOutbox(ctx, k, from) }
			var err error
			if seg.events, err = batchconsumer.New[*projection.Consumer](events, r.e.store, checkpoints,
				func(ctx context.Context, evs []eventstore.Event) error { return r.handleEvents(ctx, k, evs) }, nil, eopts); err != nil {
				r.startErr = err
				return
			}
			if seg.outbox, err = batchconsumer.New[*projection.Consumer](outbox, r.e.store, checkpoints,
				func(ctx context.Context, evs []eventstore.Event) error { return r.handleRecords(ctx, k, evs) }, claimed, oopts); err != nil {
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
func (r *Runner[S]) checkpoints() storekit.CheckpointStore {
	if r.opts.Checkpoints != nil {
		return r.opts.Checkpoints
	}
	c, _ := r.e.store.(storekit.CheckpointStore)
	return c
}

// Run runs the saga until ctx ends, then returns nil: it hands every
// stored event the saga maps to its instance (instances in parallel, each
// one's events in order), sends the commands the steps record, and fires
// deadlines when they are due. Each time an outbox consumer claims its
// checkpoint, it first reads the pending deadlines of the records up to
// there that this process has not read (all of them at the start; those a
// former lease holder, or another runner, passed since). An error of the
// event store that outlasts the retries is returned; one that concerns a
// single instance parks that instance's message and goes on.
//
// With several segments and a lease store, Run takes a member lease and
// runs its share of the segments, which it gives up to processes that join
// and takes over from processes that die (see [RunnerOptions.Segments]);
// it fires the deadlines of the instances in its share only.
//
// Before it starts, Run (and CatchUp) compares the stored event types the
// saga's subscription read when a runner last started (the first time,
// those its instances' step records took) with those this code reads,
// and records the latter. A type it read that this code does
// not read at all (renamed without its upcast.Rename step, or no longer
// registered) would pass the saga by for good, so Run returns a
// [*SetupError] naming it instead: register the rename, or upcast.Drop the
// type when the saga no longer needs its events. A type the store holds no
// event of is no loss (a rollback past the release that added it starts);
// an older release that does not read a type a newer one stored events of
// is refused too, as it would pass them by.
//
// While Run runs, the runner's gauges (cairn.saga.parked, .held, .gaps,
// .gap.age, .deadlines.pending, .deadlines.overdue, .outbox.unsent) are
// observed through RunnerOptions.MeterProvider; they are unregistered
// when the last Run of the runner returns.
func (r *Runner[S]) Run(ctx context.Context) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	if err := r.checkSubscription(ctx); err != nil {
		if endedBy(ctx, err) {
			return nil // asked to stop while starting: nothing failed
		}
		return err
	}
	// The gauges are observed while Run runs (see gauges.go).
	defer r.observeGauges()()
	outer := ctx
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
	// A failure of Run's own cancels ctx with its error; ctx ending because
	// the caller's did (cancelled, past its deadline, or with a cause of
	// the caller's) is the end Run waits for.
	if err := context.Cause(ctx); err != nil && err != context.Cause(outer) {
		return err
	}
	return nil
}

// endedBy reports whether err is ctx having ended (its error or its
// cause), and not a failure that came first.
func endedBy(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx)))
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
	if err := r.checkSubscription(ctx); err != nil {
		return err
	}
	for {
		// Deadlines fire only once the events and the commands they cause
		// are quiet, so that one due at T never overtakes an event stored
		// before T.
		for {
			for _, seg := range c.segs {
				if seg.external {
					continue
				}
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
		id, msg, problem := r.e.storedMessage(ev)
		switch {
		case problem != nil:
			if k != 0 {
				continue
			}
			if err := r.deadLetter(ctx, r.unroutedName(), ev, "", problem); err != nil {
				return err
			}
			continue
		case msg == nil:
			if k == 0 {
				r.e.stats.count(ignored)
				r.tel.counted(ctx, ignored)
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
	consumer, _ := r.segmentNames(k)
	return r.parallel(ctx, order, func(ctx context.Context, id string) error {
		for _, msg := range groups[id] {
			_, err := r.e.process(ctx, id, msg)
			if err == nil {
				continue
			}
			if !instanceProblem(err) || ctx.Err() != nil {
				return err
			}
			// The instance cannot take the event (its stream holds a record
			// that cannot be read, or the store refuses its step): the event
			// waits as a dead letter, and every other instance goes on.
			if err := r.deadLetter(ctx, consumer, *msg.event, id, err); err != nil {
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
	_, outbox := r.segmentNames(k)
	err := r.parallel(ctx, order, func(ctx context.Context, id string) error {
		for _, ev := range groups[id] {
			rec, err := decodeOutline(ev)
			if err != nil {
				r.unreadable(ctx, ev, err) // nothing in it can be sent: it is passed over
				continue
			}
			err = r.sendOutline(ctx, id, ev, rec)
			if err == nil {
				continue
			}
			if !instanceProblem(err) || ctx.Err() != nil {
				return err
			}
			// A record whose rejection its instance cannot take (its latest
			// record cannot be read, say): it waits as a dead letter of the
			// outbox, and the other instances' commands go on.
			if err := r.deadLetter(ctx, outbox, ev, id, err); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && len(events) > 0 {
		// The session read on from its claim, where the index was whole.
		r.timers.extend(k, events[len(events)-1].Position)
	}
	return err
}

// instanceProblem reports an error that concerns one instance only: a
// record of its stream that cannot be read, a step the store refuses, a
// record too large. It parks that instance's message; any other error (the
// store unavailable) fails the batch, which is tried again.
func instanceProblem(err error) bool {
	return errors.Is(err, eventstore.ErrCorrupt) || errors.Is(err, eventstore.ErrInvalidArgument) || errors.Is(err, ErrRecordTooLarge)
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

// deadLetter keeps a stored event that cannot reach its instance (it does
// not decode, its mapping finds no instance, or the instance cannot take
// it) as a dead letter of consumer, so that an operator sees it; the
// events after it go on. Without a dead letter store it is an error, which
// stops the runner.
func (r *Runner[S]) deadLetter(ctx context.Context, consumer string, ev eventstore.Event, id string, cause error) error {
	herr := &HandlerError{Saga: r.e.t.name, Instance: id, Attempts: 1, Err: cause,
		Message: fmt.Sprintf("event %s #%d of %q", ev.Type, ev.Version, ev.StreamID)}
	r.e.log.WarnContext(ctx, "saga: an event cannot reach its instance; parked as a dead letter", slog.String(telemetry.LogSaga, r.e.t.name),
		slog.String(telemetry.LogConsumer, consumer), slog.String(telemetry.LogInstance, id), slog.String(telemetry.LogStream, ev.StreamID),
		slog.Uint64(telemetry.LogVersion, ev.Version), slog.String(telemetry.LogEventType, ev.Type), slog.String(telemetry.LogEventID, ev.ID.String()),
		slog.Any(telemetry.LogError, cause))
	r.e.stats.count(parkedOut)
	r.tel.counted(ctx, parkedOut)
	if r.deadLetters == nil {
		return herr
	}
	now := time.Now().UTC()
	_, err := r.deadLetters.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: consumer, Event: ev,
		Error: herr.Error(), Attempts: 1, FirstFailure: now, LastFailure: now})
	return err
}

// unreadable reports a record of the saga's that cannot be read: logged
// with its stream and version, and counted in [Stats].
func (r *Runner[S]) unreadable(ctx context.Context, ev eventstore.Event, err error) {
	r.e.stats.unreadable.Add(1)
	r.e.log.WarnContext(ctx, "saga: a record of an instance stream cannot be read; it is passed over", slog.String(telemetry.LogSaga, r.e.t.name),
		slog.String(telemetry.LogStream, ev.StreamID), slog.Uint64(telemetry.LogVersion, ev.Version), slog.String(telemetry.LogEventType, ev.Type),
		slog.Any(telemetry.LogError, err))
}
