package projection

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// ErrNoDeadLetterStore is returned by the dead-letter methods of a consumer
// that has no dead letter store.
var ErrNoDeadLetterStore = errors.New("projection: consumer has no dead letter store")

// ErrRetryRefused matches a [*RetryRefusedError].
var ErrRetryRefused = errors.New("projection: dead letter retry refused")

// RetryRefusedError reports a [Consumer.RetryDeadLetter] that applied
// nothing and left the dead letter as it was, because applying it now could
// apply an event twice: another process holds the consumer's lease, the
// lease changed hands during the retry (Err matches
// [eventstore.ErrFenced]), or the consumer's checkpoint has not passed the
// event yet (the consumer will handle it in order).
type RetryRefusedError struct {
	Consumer string
	// ID is the dead letter's.
	ID string
	// Reason says why, for people.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *RetryRefusedError) Error() string {
	msg := fmt.Sprintf("consumer %q: retry of dead letter %q refused: %s", e.Consumer, e.ID, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrRetryRefused) true.
func (e *RetryRefusedError) Is(target error) bool { return target == ErrRetryRefused }

// Unwrap returns the underlying error.
func (e *RetryRefusedError) Unwrap() error { return e.Err }

// DeadLetters yields the consumer's dead letters, oldest first.
func (c *Consumer) DeadLetters(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error] {
	if c.opts.DeadLetters == nil {
		return func(yield func(eventstore.DeadLetter, error) bool) {
			yield(eventstore.DeadLetter{}, ErrNoDeadLetterStore)
		}
	}
	return c.opts.DeadLetters.DeadLetters(ctx, c.name)
}

// maxRetryClaims bounds how often a retry reads the checkpoint again after
// the running consumer moved it between the read and the retry's claim.
const maxRetryClaims = 100

// RetryDeadLetter runs the handler once more on a parked event (the part
// that failed), outside the normal order: the events after it have already
// been handled.
//
// The retry is fenced like a batch of the consumer: its effect is applied
// together with a claim of the checkpoint (saved unchanged under the
// fence), so that it never runs beside another holder of the consumer. The
// fence is that of this process's running consumer ([Consumer.Run] holding
// the lease); when it is not running here and it is [Options.Exclusive], the
// retry takes the lease for its duration, and when another process holds
// it, it returns a [*RetryRefusedError] and applies nothing. A lease taken
// for the retry is renewed while the handler runs, however long it takes;
// if it is lost, the retry stops and is refused. Without a lease store,
// the claim only checks that the checkpoint did not move. A
// dead letter whose event the checkpoint has not passed yet (the consumer
// parked it and then stopped before its checkpoint moved) is refused too:
// the consumer handles that event again in order, and resolves the dead
// letter when it succeeds.
//
// Before it applies anything, the retry claims the dead letter: it parks
// it again, as a compare-and-set on the generation it read, with
// [eventstore.DeadLetter.ClaimedUntil] set [Options.LeaseTTL] ahead, and
// renews the claim while it runs. Of two retries of one dead letter at
// once (two operators, an admin request sent twice, in one process or
// several), one applies it and the other is refused with nothing applied
// ([*RetryRefusedError]), or finds it gone
// ([eventstore.ErrDeadLetterNotFound]); a retry of a dead letter skipped
// meanwhile applies nothing. A retry that crashed leaves its claim, which
// lapses after the TTL; then the dead letter can be retried again. Claims
// compare the clocks of the processes that retry, which must agree to
// well within the TTL. A retry whose claim or lease cannot be kept (the
// dead letter was skipped; no renewal succeeded by a fifth of the TTL
// before the lapse) is stopped: its context is cancelled, and it is
// refused. A transactional retry whose dead letters live elsewhere checks
// its claim last and rolls back when it could have lapsed; a plain
// handler must honour its context, or it may still apply its effect
// beside a second retry that claimed the dead letter after the lapse.
//
// On success the dead letter is deleted: for a transactional consumer whose
// dead letters live in its store, in the same transaction as the effect
// (exactly once); otherwise right after the effect, so that a crash in
// between leaves it parked (at least once, never lost). On failure it stays
// parked with one more attempt, its error and last failure updated, and
// RetryDeadLetter returns a [*HandlerError]; that update is a
// compare-and-set on the dead letter's generation as the retry read it, so
// that when it changed meanwhile (another retry applied it and deleted it,
// an operator skipped it, a failure was recorded), nothing is written, and
// the error also matches [eventstore.ErrDeadLetterChanged]: a failed retry
// never brings back a dead letter that was resolved.
//
// The event is decoded again with the current registry, so a dead letter
// that failed to decode can be retried after an upcaster is deployed.
func (c *Consumer) RetryDeadLetter(ctx context.Context, id string) error {
	if c.opts.DeadLetters == nil {
		return ErrNoDeadLetterStore
	}
	d, err := c.opts.DeadLetters.DeadLetter(ctx, c.name, id)
	if err != nil {
		return err
	}
	ctx, lease, release, err := c.retryLease(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	var fence storekit.Fence
	if lease != nil {
		fence = lease.Fence
	}
	if err := c.claimedElsewhere(d); err != nil {
		return err
	}
	parts, herr := c.reg.Decode(d.Event)
	if herr == nil && d.Part >= len(parts) {
		herr = fmt.Errorf("%w: the event now decodes to %d values, and the parked part is %d",
			eventstore.ErrInvalidArgument, len(parts), d.Part)
	}
	var claim *letterClaim
	runCtx := ctx // the claim's, once claimed
	defer func() {
		if claim != nil {
			claim.release(ctx)
		}
	}()
	for claims := 0; herr == nil; claims++ {
		cp, err := c.checkpoints.Checkpoint(ctx, c.name)
		if err != nil {
			if leaseLost(ctx) {
				return c.leaseLostRefusal(ctx, id)
			}
			return fmt.Errorf("consumer %q: read checkpoint: %w", c.name, err)
		}
		if cp.Position.Before(d.Event.Position) {
			return &RetryRefusedError{Consumer: c.name, ID: id, Reason: fmt.Sprintf(
				"the checkpoint (%s) has not passed its event (position %s) yet: the consumer handles that event in order, and drops the dead letter when it succeeds",
				cp.Position, d.Event.Position)}
		}
		if claim == nil {
			if runCtx, claim, err = c.claimLetter(ctx, d); err != nil {
				if leaseLost(ctx) {
					// The claim failed because the lease ended its
					// context: the refusal, not a bare context error.
					return c.leaseLostRefusal(ctx, id)
				}
				return err
			}
		}
		f := fence
		if c.opts.Leases == nil {
			f = cp.Fence
		}
		err = c.exec.run(runCtx, func(s step) error {
			if err := s.save(cp.Position, cp.Position, f); err != nil {
				return err
			}
			if err := s.apply(s.ctx, parts[d.Part]); err != nil {
				return &partError{part: d.Part, err: err}
			}
			if c.exec.ownsLetters() {
				return s.resolve(id)
			}
			if c.exec.transactional() && !claim.holds() {
				return errClaimLapsing // not committed: another retry may take the dead letter now
			}
			return nil
		})
		// A lease or claim this retry lost comes first: the handler's
		// error is then its consequence (the context it ran in ended).
		// Otherwise the handler's own error does: it may wrap any
		// sentinel (a read model elsewhere reporting a lost lease of its
		// own), and is the handler's failure all the same.
		var pe *partError
		switch {
		case err != nil && leaseLost(ctx):
			return c.leaseLostRefusal(ctx, id)
		case err != nil && (claimLost(runCtx) || errors.Is(err, errClaimLapsing)):
			cause := context.Cause(runCtx)
			if cause == nil {
				cause = err
			}
			return &RetryRefusedError{Consumer: c.name, ID: id, Reason: "its claim on the dead letter was lost", Err: cause}
		case errors.As(err, &pe):
			herr = pe.err
			continue // the loop ends: the failure is recorded below
		case errors.Is(err, eventstore.ErrCheckpointMoved) && claims < maxRetryClaims:
			continue
		case errors.Is(err, eventstore.ErrFenced), errors.Is(err, eventstore.ErrLeaseLost):
			return &RetryRefusedError{Consumer: c.name, ID: id, Reason: "another process took the consumer's lease over", Err: err}
		case err != nil:
			return err // a store error: the dead letter is unchanged
		}
		claim.end()
		claim = nil
		if c.exec.ownsLetters() {
			return nil // resolved in the effect's transaction
		}
		err = c.opts.DeadLetters.DeleteDeadLetter(ctx, c.name, id)
		if errors.Is(err, eventstore.ErrDeadLetterNotFound) {
			return nil // skipped while its effect was applied: nothing is left to resolve
		}
		return err
	}
	if leaseLost(ctx) {
		return c.leaseLostRefusal(ctx, id)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if claim != nil {
		d = claim.end()
		claim = nil
	}
	d.Attempts++
	d.LastFailure = time.Now().UTC()
	d.Error = herr.Error()
	d.ClaimedUntil = time.Time{}
	if _, perr := c.opts.DeadLetters.ParkDeadLetter(ctx, d); perr != nil {
		herr = errors.Join(herr, perr)
	}
	return &HandlerError{Consumer: c.name, Stream: d.Event.StreamID, Version: d.Event.Version, Position: d.Event.Position,
		Type: d.Event.Type, Part: d.Part, Attempts: d.Attempts, Err: herr}
}

// leaseLostRefusal is the refusal of retry id whose lease, taken for it,
// was lost while it ran.
func (c *Consumer) leaseLostRefusal(ctx context.Context, id string) error {
	return &RetryRefusedError{Consumer: c.name, ID: id, Reason: "the lease taken for the retry was lost", Err: context.Cause(ctx)}
}

// leaseLost reports work whose lease was lost while it ran (keep
// cancelled its context).
func leaseLost(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), eventstore.ErrLeaseLost)
}

// retryLease returns the context a retry runs in and the lease it runs
// under (its fence is the one it claims the checkpoint under), and what to
// call when the retry is done: the running session's lease, or one taken
// for the retry and kept (renewed) while it runs, or, without a lease
// store, nil (the retry then uses the stored fence).
func (c *Consumer) retryLease(ctx context.Context, id string) (context.Context, *heldLease, func(), error) {
	if c.opts.Leases == nil {
		return ctx, nil, func() {}, nil
	}
	if l := c.held.Load(); l != nil {
		return c.withLease(ctx, l), l, func() {}, nil
	}
	// A session of its own: releasing its lease can never release the
	// lease of a Run in this process.
	since := time.Now()
	l, ok, err := c.opts.Leases.AcquireLease(ctx, c.name, c.sessionHolder(), c.opts.leaseTTL())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("consumer %q: taking the lease to retry dead letter %q: %w", c.name, id, err)
	}
	if !ok {
		return nil, nil, nil, &RetryRefusedError{Consumer: c.name, ID: id, Reason: fmt.Sprintf(
			"another session (%q) holds the consumer's lease until %s: retry through the Consumer whose Run holds it, or when none runs",
			l.Holder, l.Expires.Format(time.RFC3339))}
	}
	held := newHeldLease(l, since)
	ctx, cancel := context.WithCancelCause(c.withLease(ctx, held))
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		c.keep(ctx, cancel, held)
	}()
	return ctx, held, func() {
		cancel(nil)
		<-kept
		c.release(ctx, l)
	}, nil
}

// SkipDeadLetter discards a dead letter without handling it. It applies
// nothing, so it needs neither the lease nor the checkpoint; skipping a
// dead letter whose event the checkpoint has not passed does not stop the
// consumer from handling that event when it gets there.
func (c *Consumer) SkipDeadLetter(ctx context.Context, id string) error {
	if c.opts.DeadLetters == nil {
		return ErrNoDeadLetterStore
	}
	return c.opts.DeadLetters.DeleteDeadLetter(ctx, c.name, id)
}
