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

// consumers are the two checkpointed consumers of a running saga type: one
// of the events it maps, one of its own step records (the outbox, which
// also tells the deadline index of records other processes appended).
type consumers struct {
	events, outbox *projection.Consumer
}

// start makes the runner's consumers, once.
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
		popts.Filter = eventstore.Filter{Types: r.e.t.eventTypes()}
		c := &consumers{}
		var err error
		if c.events, err = projection.NewBatch(r.EventsConsumer(), r.e.store, checkpoints, r.handleEvents, popts); err != nil {
			r.startErr = err
			return
		}
		popts.Filter = eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
		if c.outbox, err = projection.NewBatch(r.OutboxConsumer(), r.e.store, checkpoints, r.handleRecords, popts); err != nil {
			r.startErr = err
			return
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
// its checkpoint, lease and dead letters (events that map to no instance)
// are stored under it.
func (r *Runner[S]) EventsConsumer() string { return StreamPrefix + r.e.t.name }

// OutboxConsumer is the name of the consumer of the saga's step records,
// which sends their commands.
func (r *Runner[S]) OutboxConsumer() string { return StreamPrefix + r.e.t.name + ":outbox" }

// Run runs the saga until ctx ends, then returns nil: it hands every
// stored event the saga maps to its instance (instances in parallel, each
// one's events in order), sends the commands the steps record, and fires
// deadlines when they are due. It first reads the pending deadlines of
// every instance from their latest steps. An error of the event store that
// outlasts the retries is returned.
func (r *Runner[S]) Run(ctx context.Context) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	if err := r.loadDeadlines(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{c.events.Run, c.outbox.Run, r.fireWhenDue, r.watchGaps} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// CatchUp handles everything stored when it is called, and what that
// causes, then returns: the events the saga maps, the commands their steps
// send (and the rejections those are fed back as), until nothing is left;
// then it fires the deadlines due at the runner's clock. Tests drive a
// saga with it and a clock they move.
func (r *Runner[S]) CatchUp(ctx context.Context) error {
	c, err := r.start()
	if err != nil {
		return err
	}
	if err := r.loadDeadlines(ctx); err != nil {
		return err
	}
	for {
		if err := c.events.CatchUp(ctx); err != nil {
			return err
		}
		before := r.sent.Load()
		if err := c.outbox.CatchUp(ctx); err != nil {
			return err
		}
		fired, err := r.FireDue(ctx)
		if err != nil {
			return err
		}
		if r.sent.Load() == before && fired == 0 {
			return nil
		}
	}
}

// handleEvents is the batch handler of the events consumer: it finds each
// event's instance, then steps the instances in parallel, each one's
// events in order.
func (r *Runner[S]) handleEvents(ctx context.Context, events []eventstore.Event) error {
	var order []string
	groups := make(map[string][]*message)
	for _, ev := range events {
		values, err := r.e.t.reg.Decode(ev)
		if err != nil {
			if err := r.park(ctx, ev, "", err); err != nil {
				return err
			}
			continue
		}
		var m *eventMapping[S]
		var v any
		for _, d := range values {
			if m = r.e.t.events[typeOf(d.Value)]; m != nil {
				v = d.Value
				break
			}
		}
		if m == nil {
			r.e.stats.count(ignored)
			continue // an upcaster turned it into types the saga does not map
		}
		id, err := r.instanceOf(m, v, ev.Metadata)
		if err != nil {
			if err := r.park(ctx, ev, "", err); err != nil {
				return err
			}
			continue
		}
		if groups[id] == nil {
			order = append(order, id)
		}
		groups[id] = append(groups[id], &message{kind: kindEvent, values: values, in: heldMessage{
			Source: ev.StreamID, Sequence: ev.Version, Ordered: true, EventID: ev.ID, Position: ev.Position,
			Event: raw{Type: ev.Type, Version: ev.SchemaVersion, Data: ev.Data}, Metadata: ev.Metadata,
		}})
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

// handleRecords is the batch handler of the outbox: it sends the commands
// of each step record, instances in parallel and each one's records in
// order, and tells the deadline index what each record leaves pending.
func (r *Runner[S]) handleRecords(ctx context.Context, events []eventstore.Event) error {
	var order []string
	groups := make(map[string][]eventstore.Event)
	for _, ev := range events {
		id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category())
		if !ok || ev.Type != recordType {
			continue
		}
		if groups[id] == nil {
			order = append(order, id)
		}
		groups[id] = append(groups[id], ev)
	}
	return r.parallel(ctx, order, func(ctx context.Context, id string) error {
		for _, ev := range groups[id] {
			rec, err := decodeRecord(ev)
			if err != nil {
				return err
			}
			r.observe(id, ev.Version, rec)
			if err := r.send(ctx, ev, rec); err != nil {
				return err
			}
		}
		return nil
	})
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

// loadDeadlines fills the deadline and gap indexes from the latest step of
// every instance, read from the store. It reads the saga's step records
// once.
func (r *Runner[S]) loadDeadlines(ctx context.Context) error {
	r.loadOnce.Lock()
	defer r.loadOnce.Unlock()
	if r.loaded {
		return nil
	}
	f := eventstore.Filter{Types: []string{recordType}, StreamPrefixes: []string{r.e.t.Category()}}
	latest := make(map[string]*record)
	versions := make(map[string]uint64)
	for ev, err := range r.e.store.ReadAll(ctx, eventstore.Start, f) {
		if err != nil {
			return err
		}
		id, _ := strings.CutPrefix(ev.StreamID, r.e.t.Category())
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
	r.loaded = true
	return nil
}

// fireWhenDue fires deadlines as they fall due, waiting on one timer for
// the earliest, until ctx ends.
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
			if _, err := r.FireDue(ctx); err != nil {
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
