package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/keylock"
	"github.com/cairn-es/cairn/internal/lru"
	"github.com/cairn-es/cairn/internal/telemetry"
	"github.com/cairn-es/cairn/internal/trusted"
)

// engine runs the steps of one saga type's instances on a store: the one
// code path behind the runner, Deliver, the operator's calls and sagatest.
type engine[S any] struct {
	t        *Type[S]
	store    eventstore.Store
	clock    Clock
	now      func() time.Time
	log      *slog.Logger
	retry    backoff.Policy
	attempts int
	locks    keylock.Locks
	stats    *counters
	// tel traces and measures the steps; nil for none (a replay).
	tel *sagaTelemetry
	// stored, when set, is told of every record this engine appends.
	stored func(id string, version uint64, rec *record)
	// cache holds the latest record of hot instances, by stream. An entry
	// is replaced by each step this engine stores, and dropped when an
	// append finds that another process stepped the instance.
	cache *lru.Cache[*instance[S]]
	// events reads the stored events that records refer to; nil means the
	// store (a replay reads them from the history it is given).
	events func(ctx context.Context, stream string, version uint64) (eventstore.Event, bool, error)
}

// message is one thing for an instance to handle.
type message struct {
	// in is the message as a record keeps it.
	in envelope
	// event is a stored event's payload: handed over by the subscription
	// or read back by reference. values are its decoded values, when the
	// caller decoded it already.
	event  *eventstore.Event
	values []codec.Decoded
	// command is a rejected command's payload, when the caller has it.
	command *raw
	// md is the metadata of the message's step record: what its commands
	// carry on (the correlation ID).
	md eventstore.Metadata
	// fromHeld says the message is taken from the instance's held ones;
	// pending that the drain read it again from a pending source, and last
	// that it is the last one of that source the drain found; unpark that
	// it is the parked one, retried by an operator; pass that it is no
	// message but the drain's finding that a pending source has nothing
	// more for the instance (in.Sequence is where the source's progress
	// moves to).
	fromHeld, pending, last, unpark, pass bool
}

func (m *message) kind() string { return m.in.kind() }

// key identifies the message's step (see envelope.key); a pass has a key
// of its own, so that its record's ID never equals that of an event's
// step at the same version.
func (m *message) key() string {
	if m.pass {
		return "p/" + m.in.Source + "/" + uitoa(m.in.Sequence)
	}
	return m.in.key()
}

// String describes the message for errors and logs.
func (m *message) String() string { return describe(m.in) }

// describe names a message for errors, logs and operators.
func describe(m envelope) string {
	switch m.kind() {
	case kindDeadline:
		return fmt.Sprintf("deadline %s", m.Deadline)
	case kindRejected:
		return fmt.Sprintf("rejection of command %s", m.Command)
	case kindCommand:
		return fmt.Sprintf("failure of command %s", m.Command)
	}
	return fmt.Sprintf("event %s #%d of %q", m.Type, m.Sequence, m.Source)
}

// outcome is what a step did with its message.
type outcome int

const (
	handled   outcome = iota // the handler ran and the step is stored
	duplicate                // taken before, by its source's progress or the settled commands
	ignored                  // for an instance that is not started or is complete, or a deadline no longer pending
	heldBack                 // early, or behind a parked message: kept in the instance's stream
	parkedOut                // failed until the retries ran out, and parked
)

// maxConflicts bounds the reloads of one step that keeps losing its append
// to another runner of the same instance; each reload first sees whether
// the other runner handled the message already.
const maxConflicts = 50

// process handles msg for instance id: the step, retried while its handler
// fails and parked when the retries run out, then whatever held messages
// that step released. Only store errors (and the end of ctx) are returned.
func (e *engine[S]) process(ctx context.Context, id string, msg *message) (outcome, error) {
	held, err := e.locks.Lock(ctx, e.t.Stream(id))
	if err != nil {
		return 0, err
	}
	defer held.Unlock()
	out, err := e.retried(ctx, id, msg)
	if err != nil {
		return out, err
	}
	return out, e.drain(ctx, id)
}

// retried runs the step of msg until it does not fail, or parks msg when
// its handler keeps failing (at once when its failure cannot change: the
// step's record would be too large). It is one `step` span, a child of
// the span in ctx, and one count of cairn.saga.steps.
func (e *engine[S]) retried(ctx context.Context, id string, msg *message) (outcome, error) {
	ctx, span := e.tel.startStep(ctx, id, msg)
	out, err := e.attempt(ctx, id, msg, span)
	span.end(ctx, msg, out, err)
	return out, err
}

// attempt is retried, under the step's span.
func (e *engine[S]) attempt(ctx context.Context, id string, msg *message, span stepSpan) (outcome, error) {
	for attempt := 1; ; attempt++ {
		out, herr, err := e.step(ctx, id, msg, nil)
		switch {
		case err != nil:
			return out, err
		case herr == nil:
			return out, nil
		case attempt >= e.attempts || errors.Is(herr, ErrRecordTooLarge):
			span.parked(herr)
			e.log.WarnContext(ctx, "saga: message parked; the instance holds later messages behind it",
				slog.String("saga", e.t.name), slog.String("instance", id), slog.String("message", msg.String()),
				slog.Int("attempts", attempt), slog.Any("error", herr))
			out, perr, err := e.step(ctx, id, msg, &parkedMessage{Error: herr.Error(), Attempts: attempt})
			if err == nil && perr != nil {
				// Parking decides nothing that can fail: were it to, the
				// message would be neither handled nor parked, and a drain
				// would take it again forever.
				err = fmt.Errorf("saga %q, instance %q: parking %s: %w", e.t.name, id, msg, perr)
			}
			return out, err
		}
		e.log.DebugContext(ctx, "saga: handler failed; retrying", slog.String("saga", e.t.name),
			slog.String("instance", id), slog.String("message", msg.String()), slog.Int("attempt", attempt), slog.Any("error", herr))
		span.retry(attempt, herr)
		if err := backoff.Wait(ctx, e.retry.Delay(attempt)); err != nil {
			return out, err
		}
	}
}

// step decides msg against the instance's latest record and appends the
// new record, reloading when another runner appended first. A handler's
// failure is herr; err is the store's. park, when set, records msg as
// parked instead of handling it.
func (e *engine[S]) step(ctx context.Context, id string, msg *message, park *parkedMessage) (out outcome, herr, err error) {
	for conflicts := 0; ; conflicts++ {
		in, cached, err := e.load(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		rec, out, herr, err := e.decide(ctx, in, msg, park)
		if err != nil {
			var stale *StaleError
			if cached && errors.As(err, &stale) {
				// Judged on what this process last saw: the operator's view,
				// read from the store, may be newer. Look again.
				e.cache.Evict(in.stream)
				continue
			}
			return 0, nil, err
		}
		if herr == nil && rec == nil && cached {
			// Nothing to store, judged on what this process last saw: another
			// process may have stepped the instance since (set the deadline
			// that fires, say), which no append would reveal. Look again.
			e.cache.Evict(in.stream)
			continue
		}
		if herr != nil || rec == nil {
			e.stats.count(out)
			return out, herr, nil
		}
		next := uint64(0)
		if in.exists {
			next = in.version + 1
		}
		// The append's span is the record's context: its metadata carries
		// it, and so do the deadlines it schedules, for the outbox's sends
		// and the deadlines' firing to link to.
		actx, op, traced := e.tel.startAppend(ctx, in.stream, true)
		if trace := op.TraceParent(); trace != "" {
			traceNewDeadlines(rec, &in.rec, trace)
		}
		data, err := e.encode(in, next, msg, rec, park != nil)
		if err != nil {
			if traced {
				op.End(actx, 0, err)
			}
			if errors.Is(err, ErrRecordTooLarge) && out == handled {
				return 0, err, nil // parked, as a handler's failure that will not change
			}
			return 0, nil, err
		}
		op.Inject(&data.Metadata)
		telemetry.Fit(&data)
		hit(failpoint.SagaBeforeStepAppend)
		res, err := e.store.Append(trusted.Writer(actx), in.stream, in.expected(), data)
		hit(failpoint.SagaAfterStepAppend)
		if traced {
			op.End(actx, next, err)
		}
		if err == nil && res.Duplicate && conflicts < maxConflicts {
			// A record of this message at this version is stored already:
			// this step (an earlier attempt whose reply was lost, another
			// runner deciding the same), or one decided on a view as old
			// as this one, which later steps have followed since (another
			// runner's park of a command that an operator then retried,
			// and that failed again here). Only the instance as stored
			// says which: look again, and decide on it.
			e.cache.Evict(in.stream)
			continue
		}
		if err == nil && res.Duplicate {
			e.cache.Evict(in.stream)
			e.stats.count(duplicate)
			return duplicate, nil, nil
		}
		if err == nil {
			e.stats.count(out)
			e.stepped(in, next, rec)
			return out, nil, nil
		}
		e.cache.Evict(in.stream)
		if !isConflict(err) || conflicts >= maxConflicts {
			return 0, nil, fmt.Errorf("saga %q, instance %q: storing the step of %s: %w", e.t.name, id, msg, err)
		}
		e.stats.conflicts.Add(1)
		// Another runner stepped this instance: reload, and let the
		// progress of its sources say whether it handled msg already.
		if err := backoff.Wait(ctx, e.retry.Delay(conflicts+1)/4); err != nil {
			return 0, nil, err
		}
	}
}

// traceNewDeadlines records trace as the context of the deadlines that
// rec schedules and was did not hold: a deadline keeps the context of
// the step that scheduled it, not of the steps that carried it on.
func traceNewDeadlines(rec, was *record, trace string) {
	for i, d := range rec.Deadlines {
		if d.Trace == "" && !slices.ContainsFunc(was.Deadlines, func(p deadline) bool { return p.ID == d.ID }) {
			rec.Deadlines[i].Trace = trace
		}
	}
}

// resume drains instance id, for a caller that stepped nothing but read
// its record at version seen: a cached instance older than that is read
// again first.
func (e *engine[S]) resume(ctx context.Context, id string, seen uint64) error {
	held, err := e.locks.Lock(ctx, e.t.Stream(id))
	if err != nil {
		return err
	}
	defer held.Unlock()
	if in, ok := e.cache.Get(e.t.Stream(id)); ok && in.version < seen {
		e.cache.Evict(in.stream)
	}
	return e.drain(ctx, id)
}

// drain handles the held messages that the instance can take now, and the
// stored events waiting in its pending sources, one step each, until none
// is left that it can.
func (e *engine[S]) drain(ctx context.Context, id string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		in, _, err := e.load(ctx, id)
		if err != nil {
			return err
		}
		msg, err := e.releasable(ctx, in)
		if err != nil || msg == nil {
			return err
		}
		if _, err := e.retried(ctx, id, msg); err != nil {
			return err
		}
	}
}

// isConflict reports an append that lost to another writer of the stream.
func isConflict(err error) bool {
	return errors.Is(err, eventstore.ErrWrongVersion) || errors.Is(err, eventstore.ErrEventIDConflict)
}

// stepped records that the engine appended rec at version of instance in:
// in the cache, and to the engine's observer.
func (e *engine[S]) stepped(in *instance[S], version uint64, rec *record) {
	e.cache.Put(in.stream, &instance[S]{id: in.id, stream: in.stream, exists: true, version: version, rec: *rec})
	if e.stored != nil {
		e.stored(in.id, version, rec)
	}
}
