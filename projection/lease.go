package projection

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
)

// heldLease is a lease as this process counts it: from the start of the
// request that granted or last renewed it, not from the reply. The store
// counted it from a moment in between, so this count ends first, whatever
// the latency (with clocks that run at about the same rate). The session
// that holds it shares it with its work: keep renews it, and so do the
// transactions of a consumer whose lease lives in its store (see
// txExecutor.inTx).
type heldLease struct {
	// Lease names it: name, holder and fence never change.
	storekit.Lease
	since atomic.Int64 // Unix nanoseconds
}

func newHeldLease(l storekit.Lease, since time.Time) *heldLease {
	h := &heldLease{Lease: l}
	h.since.Store(since.UnixNano())
	return h
}

// renewedSince returns when the request that last renewed it was sent.
func (h *heldLease) renewedSince() time.Time { return time.Unix(0, h.since.Load()) }

// renewed records a renewal whose request was sent at since.
func (h *heldLease) renewed(since time.Time) {
	n := since.UnixNano()
	for {
		old := h.since.Load()
		if old >= n || h.since.CompareAndSwap(old, n) {
			return
		}
	}
}

// due reports a lease that no renewal has extended for a third of ttl,
// which is how often keep renews it.
func (h *heldLease) due(ttl time.Duration) bool { return time.Since(h.renewedSince()) >= ttl/3 }

// stopBy is when a consumer that holds a lease of ttl granted by a request
// sent at since, and could not renew it, stops applying effects: a fifth
// of the TTL before the lease could lapse. The margin leaves time to
// notice the cancellation between two events, and room for clocks that
// run at slightly different rates.
func stopBy(since time.Time, ttl time.Duration) time.Time { return since.Add(ttl - ttl/5) }

// MaxHolderLen is the longest [Options.Holder]: the lease stores' limit on
// a holder ([storekit.MaxStreamLen] bytes) less the session ID that
// every session adds to it (see [Consumer.sessionHolder]).
const MaxHolderLen = storekit.MaxStreamLen - len(holderSep) - ulid.EncodedSize

// holderSep separates the process's holder name from the session's ID.
const holderSep = "/"

// sessionHolder returns the holder name of a new session: Options.Holder,
// which names the process, and a ULID of the session. Each session is a
// holder of its own, so that a second session of one process (a CatchUp,
// Rebuild or retry beside its Run, of the same Consumer or of another
// built alike) waits for the lease like any other holder: under the same
// name, the store would hand it the lease that Run holds (renewing it,
// fence unchanged), it would replay beside Run, and its release would end
// Run's lease while Run went on.
func (c *Consumer) sessionHolder() string {
	id := ulid.Make().String()
	if c.opts.Holder == "" {
		return id
	}
	return c.opts.Holder + holderSep + id
}

// ProcessHolder returns the [Options.Holder] part of the holder of a
// consumer's lease, as a lease store reports it: holder without the
// session ID that each session adds ("/" and a ULID), or holder itself
// when it has none (a session of a consumer without Options.Holder is
// named by its ID alone).
func ProcessHolder(holder string) string {
	i := strings.LastIndex(holder, holderSep)
	if i < 0 {
		return holder
	}
	if _, err := ulid.ParseStrict(holder[i+len(holderSep):]); err != nil {
		return holder
	}
	return holder[:i]
}

// acquire waits until holder holds this consumer's lease, polling a few
// times per TTL so that it takes over soon after another holder's lease
// lapses. A request that has not answered when the lease it asks for would
// have to be given up is abandoned and tried again; one that the store
// refuses as invalid is returned, as retrying it cannot help.
func (c *Consumer) acquire(ctx context.Context, holder string) (*heldLease, error) {
	ttl := c.opts.leaseTTL()
	waiting := false
	for {
		since := time.Now()
		actx, done := c.until(ctx, stopBy(since, ttl))
		l, ok, err := c.opts.Leases.AcquireLease(actx, c.name, holder, ttl)
		done()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, eventstore.ErrInvalidArgument):
			// The store refuses this request, and will refuse it again.
			return nil, err
		case err != nil:
			c.log.WarnContext(ctx, "projection: acquiring the lease failed; retrying", slog.Any("error", err))
		case ok:
			c.stats.setLease(true)
			c.log.DebugContext(ctx, "projection: lease acquired", slog.String("holder", holder), slog.Uint64("fence", uint64(l.Fence)))
			return newHeldLease(l, since), nil
		case !waiting:
			waiting = true
			c.log.DebugContext(ctx, "projection: lease held by another process; waiting",
				slog.String("holder", l.Holder), slog.Time("expires", l.Expires))
		}
		if err := backoff.Wait(ctx, ttl/5); err != nil {
			return nil, err
		}
	}
}

// keep renews the lease every third of its TTL until ctx ends, and cancels
// ctx with a [*storekit.LeaseLostError] when it is lost, or when no
// renewal succeeded by the lease's stop time. Each renewal has that time
// as its deadline, so that one that hangs is abandoned while the lease
// still holds, and the consumer stops before anyone else can take it over.
//
// A consumer whose transactions renew the lease (leaseInTx) has no stop
// time: a transaction that finds the lease unrenewed for a third of its
// TTL renews it before its commit, the fence keeps its effects to one
// across holders anyway, and so a late renewal (SQLite's renewals wait
// for the writer, which a long transaction holds, its own or another's)
// costs nothing: only a lost lease stops it.
func (c *Consumer) keep(ctx context.Context, cancel context.CancelCauseFunc, l *heldLease) {
	ttl := c.opts.leaseTTL()
	wait := ttl / 3
	for {
		stop, pause := stopBy(l.renewedSince(), ttl), wait
		if !c.leaseInTx {
			pause = min(wait, time.Until(stop))
		}
		if backoff.Wait(ctx, pause) != nil {
			return
		}
		if !c.leaseInTx && !time.Now().Before(stop) {
			c.lost(ctx, cancel, l.Lease, "no renewal succeeded before the lease's stop time")
			return
		}
		since := time.Now()
		rctx, done := c.until(ctx, stop)
		_, err := c.opts.Leases.RenewLease(rctx, l.Lease, ttl)
		done()
		if err == nil {
			l.renewed(since)
			wait = ttl / 3
			continue
		}
		if ctx.Err() != nil {
			return
		}
		c.log.WarnContext(ctx, "projection: renewing the lease failed", slog.Any("error", err))
		if errors.Is(err, eventstore.ErrLeaseLost) {
			c.lost(ctx, cancel, l.Lease, "the store no longer holds it for this consumer")
			return
		}
		// Try again soon: the top of the loop gives up at the stop time.
		wait = ttl / 10
	}
}

// until bounds a lease request by the time at which the lease it asks
// for would have to be given up: a request that hangs past it is
// abandoned. A consumer whose transactions renew its lease has no such
// time: its request may wait (behind SQLite's writer) as long as it takes.
func (c *Consumer) until(ctx context.Context, stop time.Time) (context.Context, context.CancelFunc) {
	if c.leaseInTx {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, stop)
}

// lost stops the consumer's work: its effects must end before another
// holder's begin.
func (c *Consumer) lost(ctx context.Context, cancel context.CancelCauseFunc, l storekit.Lease, why string) {
	c.stats.setLease(false)
	c.log.WarnContext(ctx, "projection: lease lost; stopping", slog.String("reason", why), slog.Uint64("fence", uint64(l.Fence)))
	cancel(&storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence})
}

// release gives the lease up, so that a waiting process takes over at
// once rather than after the TTL, and reports whether the store still
// holds it for l's holder (the release failed, and it was not lost). It
// runs when ctx may have ended.
func (c *Consumer) release(ctx context.Context, l storekit.Lease) (kept bool) {
	c.stats.setLease(false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := c.opts.Leases.ReleaseLease(ctx, l)
	if err != nil {
		c.log.DebugContext(ctx, "projection: releasing the lease", slog.Any("error", err))
	}
	return err != nil && !errors.Is(err, eventstore.ErrLeaseLost)
}
