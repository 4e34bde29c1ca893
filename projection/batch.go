package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/internal/failpoint"
	"github.com/cairn-es/cairn/internal/telemetry"
)

type plainExecutor struct {
	c *Consumer
	h Handler
}

func (x plainExecutor) transactional() bool { return false }
func (x plainExecutor) ownsLetters() bool   { return false }

func (x plainExecutor) run(ctx context.Context, body func(step) error) error {
	return body(step{
		ctx: ctx,
		apply: func(ctx context.Context, d codec.Decoded) error {
			return x.c.guard(ctx, "handler", &d.Event, func() error { return x.h(ctx, d) })
		},
		save: func(expected, next eventstore.Position, fence storekit.Fence) error {
			return x.c.checkpoints.SaveCheckpoint(ctx, x.c.name, expected, next, fence)
		},
		park: func(d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
			return x.c.opts.DeadLetters.ParkDeadLetter(ctx, d)
		},
		resolve: func(id string) error {
			return x.c.opts.DeadLetters.DeleteDeadLetter(ctx, x.c.name, id)
		},
	})
}

type txExecutor[Tx any] struct {
	c     *Consumer
	store storekit.TxCheckpointStore[Tx]
	h     TxHandler[Tx]
	// ownDeadLetters says the dead letters live in store, so that they are
	// parked and resolved in the transaction that moves the checkpoint or
	// applies a retry.
	ownDeadLetters bool
	// leases, when set, is store as the consumer's lease store: each
	// transaction renews the lease it runs under (see inTx).
	leases storekit.TxLeaseStore[Tx]
}

func (x txExecutor[Tx]) transactional() bool { return true }
func (x txExecutor[Tx]) ownsLetters() bool   { return x.ownDeadLetters }

// inTx runs fn in a transaction of the store. When the consumer's lease
// lives in the same store and no renewal has extended the lease that
// ctx's work runs under for a third of its TTL (the transaction is long,
// or other transactions made keep's renewals wait: SQLite has one
// writer), the transaction renews it too, last, so that the lease check
// is part of its commit: the effects commit only while the consumer holds
// its lease, and the lease lives on however long transactions take.
// Renewing in every transaction would cost a write each (a third of a
// SQLite catch-up's rate with batches of one).
func (x txExecutor[Tx]) inTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	l := x.c.leaseOf(ctx)
	var renewing time.Time
	err := x.store.InTx(ctx, func(ctx context.Context, tx Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		ttl := x.c.opts.leaseTTL()
		if l == nil || x.leases == nil || !l.due(ttl) {
			return nil
		}
		renewing = time.Now()
		if _, err := x.leases.RenewLeaseTx(ctx, tx, l.Lease, ttl); err != nil {
			return fmt.Errorf("consumer %q: renewing the lease in the transaction: %w", x.c.name, err)
		}
		return nil
	})
	if err == nil && !renewing.IsZero() {
		l.renewed(renewing)
	}
	return err
}

func (x txExecutor[Tx]) run(ctx context.Context, body func(step) error) error {
	return x.inTx(ctx, func(ctx context.Context, tx Tx) error {
		return body(step{
			ctx: ctx,
			apply: func(ctx context.Context, d codec.Decoded) error {
				return x.c.guard(ctx, "handler", &d.Event, func() error { return x.h(ctx, tx, d) })
			},
			save: func(expected, next eventstore.Position, fence storekit.Fence) error {
				return x.store.SaveCheckpointTx(ctx, tx, x.c.name, expected, next, fence)
			},
			park: func(d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
				if x.ownDeadLetters {
					return x.store.ParkDeadLetterTx(ctx, tx, d)
				}
				return x.c.opts.DeadLetters.ParkDeadLetter(ctx, d)
			},
			resolve: func(id string) error {
				if x.ownDeadLetters {
					return x.store.DeleteDeadLetterTx(ctx, tx, x.c.name, id)
				}
				return x.c.opts.DeadLetters.DeleteDeadLetter(ctx, x.c.name, id)
			},
		})
	})
}

// flush handles a batch of stored events and moves the checkpoint from
// from to the last one's position, and returns that position. pend holds
// the dead letters of events after from, which a successful handling
// resolves. The batch is traced and measured as one `process` operation.
func (c *Consumer) flush(ctx context.Context, batch []unit, from eventstore.Position, fence storekit.Fence, pend pending) (eventstore.Position, error) {
	ctx, span := c.startBatch(ctx, batch)
	to, err := c.flushTraced(ctx, span.recording(), batch, from, fence, pend)
	span.end(ctx, err)
	return to, err
}

// flushTraced is flush in the batch's span; traced says the span records,
// and so that each event is handled in a span of its own.
func (c *Consumer) flushTraced(ctx context.Context, traced bool, batch []unit, from eventstore.Position, fence storekit.Fence, pend pending) (eventstore.Position, error) {
	if c.batch != nil {
		return c.flushBatch(ctx, batch, from, fence)
	}
	to := batch[len(batch)-1].ev.Position
	if !c.exec.transactional() {
		for i, u := range batch {
			hctx, span := c.startHandle(ctx, traced, &batch[i].ev)
			err := c.handlePlain(hctx, u, pend)
			endHandle(hctx, span, err)
			if err != nil {
				return c.savePrefix(ctx, batch[:i], from, fence, err)
			}
		}
		failpoint.Hit(failpoint.CheckpointBeforeSave)
		if err := c.exec.run(ctx, func(s step) error { return s.save(from, to, fence) }); err != nil {
			return from, err
		}
		failpoint.Hit(failpoint.CheckpointAfterSave)
		c.stats.checkpointed(from, to, len(batch), batch[len(batch)-1].ev.RecordedAt)
		return to, nil
	}

	// The fast path: the whole batch and its checkpoint in one transaction.
	// When it rolls back, each event is handled again in a transaction of
	// its own below, under a handle span of its own.
	err := c.exec.run(ctx, func(s step) error {
		if err := s.claim(from, fence); err != nil {
			return err
		}
		for i, u := range batch {
			if u.decodeErr != nil {
				return &partError{unit: i, err: u.decodeErr}
			}
			if err := c.applyAll(s, traced, &batch[i]); err != nil {
				return &partError{unit: i, part: err.part, err: err.err}
			}
		}
		failpoint.Hit(failpoint.CheckpointBeforeSave)
		if err := s.save(from, to, fence); err != nil {
			return err
		}
		if err := c.refresh(ctx, pend, from, to); err != nil {
			return err
		}
		for _, u := range batch {
			if err := pend.resolve(s, u, nil); err != nil {
				return err
			}
		}
		return nil
	})
	var pe *partError
	switch {
	case err == nil:
		failpoint.Hit(failpoint.CheckpointAfterSave)
		for _, u := range batch {
			pend.handled(u)
		}
		c.stats.checkpointed(from, to, len(batch), batch[len(batch)-1].ev.RecordedAt)
		return to, nil
	case !errors.As(err, &pe):
		return from, err
	case ctx.Err() != nil:
		return from, ctx.Err()
	}
	// Something failed and the transaction rolled back: go event by event,
	// one transaction each, so that the failing one is retried and parked
	// alone and the others commit.
	for i, u := range batch {
		var first *failure
		if i == pe.unit {
			first = &failure{part: pe.part, attempts: 1, first: time.Now().UTC(), err: pe.err}
			first.last = first.first
		}
		hctx, span := c.startHandle(ctx, traced, &batch[i].ev)
		next, err := c.handleTx(hctx, u, from, fence, first, pend)
		endHandle(hctx, span, err)
		if err != nil {
			return from, err
		}
		from = next
	}
	return from, nil
}

// savePrefix moves the checkpoint past the events of a plain batch that
// were handled before the consumer had to stop (a [Stop] failure, the end
// of ctx), so that a restart does not handle them again; then it returns
// the error that stopped it. The save may run after ctx ended; the
// checkpoint's compare-and-set and fence keep it safe.
func (c *Consumer) savePrefix(ctx context.Context, done []unit, from eventstore.Position, fence storekit.Fence, stop error) (eventstore.Position, error) {
	if len(done) == 0 {
		return from, stop
	}
	to := done[len(done)-1].ev.Position
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.checkpoints.SaveCheckpoint(ctx, c.name, from, to, fence); err != nil {
		return from, errors.Join(stop, err)
	}
	c.stats.checkpointed(from, to, len(done), done[len(done)-1].ev.RecordedAt)
	return to, stop
}

// failure tracks the failed attempts on one part of a stored event.
type failure struct {
	part        int
	attempts    int
	first, last time.Time
	err         error
}

func (f *failure) record(err error) {
	now := time.Now().UTC()
	if f.attempts == 0 {
		f.first = now
	}
	f.attempts++
	f.last = now
	f.err = err
}

// decodeFailure is the failure of an event that does not decode: one
// attempt, since decoding again cannot help, on part 0.
func decodeFailure(err error) *failure {
	f := &failure{}
	f.record(err)
	return f
}

// handlePlain applies every part of a stored event, retrying each failing
// part and then parking it, and resolves the dead letters that an earlier
// run parked for the parts that now succeeded. The checkpoint moves later,
// with the batch: a crash before that handles the event again, and parks
// again (the same dead letter) what fails again.
func (c *Consumer) handlePlain(ctx context.Context, u unit, pend pending) error {
	given := make(map[int]*failure)
	if u.decodeErr != nil {
		given[0] = decodeFailure(u.decodeErr)
		if err := c.parkPlain(ctx, u, given[0]); err != nil {
			return err
		}
	}
	for j, d := range u.parts {
		f := &failure{part: j}
		for {
			err := c.exec.run(ctx, func(s step) error { return s.apply(s.ctx, d) })
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			f.record(err)
			if f.attempts >= c.opts.attempts() {
				if err := c.parkPlain(ctx, u, f); err != nil {
					return err
				}
				given[j] = f
				break
			}
			if err := c.backOff(ctx, u, f); err != nil {
				return err
			}
		}
	}
	if err := c.exec.run(ctx, func(s step) error { return pend.resolve(s, u, given) }); err != nil {
		return err
	}
	pend.handled(u)
	return nil
}

// parkPlain parks a part of a plain consumer's event at once, or returns
// the error that stops the consumer.
func (c *Consumer) parkPlain(ctx context.Context, u unit, f *failure) error {
	herr := c.handlerError(u, f)
	if !c.parks() {
		return herr
	}
	var d eventstore.DeadLetter
	err := c.exec.run(ctx, func(s step) (err error) {
		d, err = s.park(c.letter(u, f))
		return err
	})
	if err != nil {
		return errors.Join(herr, err)
	}
	c.logParked(ctx, d)
	return nil
}

// handleTx applies one stored event and moves the checkpoint past it in
// one transaction, retrying while a part fails. A part whose retries are
// spent is given up: it is parked in that same transaction when the dead
// letters live in the consumer's store (so that a crash before the commit
// leaves neither the dead letter nor the checkpoint move, and the event is
// handled again), and otherwise parked from inside it, after the
// checkpoint's compare-and-set has passed. first is a failure already seen
// on this event, if any.
func (c *Consumer) handleTx(ctx context.Context, u unit, from eventstore.Position, fence storekit.Fence, first *failure, pend pending) (eventstore.Position, error) {
	given := make(map[int]*failure)
	fails := make(map[int]*failure)
	if u.decodeErr != nil {
		// Nothing to retry: parked once, at once.
		given[0] = decodeFailure(u.decodeErr)
		if !c.parks() {
			return from, c.handlerError(u, given[0])
		}
	} else if first != nil {
		fails[first.part] = first
	}
	for {
		if f := failing(fails, given); f != nil {
			if f.attempts >= c.opts.attempts() {
				if !c.parks() {
					return from, c.handlerError(u, f)
				}
				given[f.part] = f
				continue
			}
			if err := c.backOff(ctx, u, f); err != nil {
				return from, err
			}
		}
		var parked []eventstore.DeadLetter
		err := c.exec.run(ctx, func(s step) error {
			parked = parked[:0]
			if err := s.claim(from, fence); err != nil {
				return err
			}
			for j, d := range u.parts {
				if given[j] != nil {
					continue
				}
				if err := s.apply(s.ctx, d); err != nil {
					return &partError{part: j, err: err}
				}
			}
			if err := s.save(from, u.ev.Position, fence); err != nil {
				return err
			}
			if err := c.refresh(ctx, pend, from, u.ev.Position); err != nil {
				return err
			}
			for _, part := range slices.Sorted(maps.Keys(given)) {
				d, err := s.park(c.letter(u, given[part]))
				if err != nil {
					return errors.Join(c.handlerError(u, given[part]), err)
				}
				parked = append(parked, d)
			}
			return pend.resolve(s, u, given)
		})
		var pe *partError
		switch {
		case err == nil:
			pend.handled(u)
			for _, d := range parked {
				c.logParked(ctx, d)
			}
			c.stats.checkpointed(from, u.ev.Position, 1, u.ev.RecordedAt)
			return u.ev.Position, nil
		case !errors.As(err, &pe):
			return from, err
		case ctx.Err() != nil:
			return from, ctx.Err()
		}
		f := fails[pe.part]
		if f == nil {
			f = &failure{part: pe.part}
			fails[pe.part] = f
		}
		f.record(pe.err)
	}
}

// failing returns the failure of a part that is not given up, if any.
func failing(fails, given map[int]*failure) *failure {
	for part, f := range fails {
		if given[part] == nil && f.attempts > 0 && f.err != nil {
			return f
		}
	}
	return nil
}

// applyAll applies the parts of one stored event of a transactional
// batch's fast path, in s, under the event's handle span when the batch is
// traced, and returns the first failure.
func (c *Consumer) applyAll(s step, traced bool, u *unit) *partError {
	ctx, span := c.startHandle(s.ctx, traced, &u.ev)
	for j, d := range u.parts {
		if err := s.apply(ctx, d); err != nil {
			// Retried alone, after the batch's transaction rolls back.
			traceRetry(ctx, 1, err)
			endHandle(ctx, span, nil)
			return &partError{part: j, err: err}
		}
	}
	endHandle(ctx, span, nil)
	return nil
}

func (c *Consumer) backOff(ctx context.Context, u unit, f *failure) error {
	traceRetry(ctx, f.attempts, f.err)
	c.log.DebugContext(ctx, "projection: handler failed; retrying",
		slog.String(telemetry.LogStream, u.ev.StreamID), slog.Uint64(telemetry.LogVersion, u.ev.Version),
		slog.String(telemetry.LogEventType, u.ev.Type), slog.Int("part", f.part), slog.Int("attempt", f.attempts), slog.Any(telemetry.LogError, f.err))
	return backoff.Wait(ctx, c.opts.delay(f.attempts))
}

// parks reports whether a part whose retries are spent is parked; if not,
// the consumer stops with a [*HandlerError].
func (c *Consumer) parks() bool {
	return c.opts.OnFailure != Stop && c.opts.DeadLetters != nil
}

func (c *Consumer) handlerError(u unit, f *failure) *HandlerError {
	return &HandlerError{Consumer: c.name, Stream: u.ev.StreamID, Version: u.ev.Version, Position: u.ev.Position,
		Type: u.ev.Type, Part: f.part, Attempts: f.attempts, Err: f.err}
}

// letter is the dead letter of a part given up.
func (c *Consumer) letter(u unit, f *failure) eventstore.DeadLetter {
	return eventstore.DeadLetter{
		Consumer: c.name, Event: u.ev, Part: f.part, Error: f.err.Error(),
		Attempts: f.attempts, FirstFailure: f.first, LastFailure: f.last,
	}
}

// logParked logs a dead letter parked, and records it on the event's
// handle span in ctx.
func (c *Consumer) logParked(ctx context.Context, d eventstore.DeadLetter) {
	traceParked(ctx, d)
	e := d.Event
	c.log.WarnContext(ctx, "projection: event parked as a dead letter",
		slog.String("dead_letter", d.ID), slog.String(telemetry.LogStream, e.StreamID), slog.Uint64(telemetry.LogVersion, e.Version),
		slog.String(telemetry.LogEventType, e.Type), slog.String(telemetry.LogEventID, e.ID.String()),
		slog.String(telemetry.LogPosition, e.Position.String()), slog.Int("part", d.Part),
		slog.Int("attempts", d.Attempts), slog.String(telemetry.LogError, d.Error))
}
