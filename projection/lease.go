package projection

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/backoff"
)

// acquire waits until this consumer holds its lease, polling a few times
// per TTL so that it takes over soon after the holder's lease lapses.
func (c *Consumer) acquire(ctx context.Context) (eventstore.Lease, error) {
	holder := c.opts.Holder
	if holder == "" {
		holder = ulid.Make().String()
	}
	ttl := c.opts.leaseTTL()
	waiting := false
	for {
		l, ok, err := c.opts.Leases.AcquireLease(ctx, c.name, holder, ttl)
		switch {
		case err != nil && ctx.Err() != nil:
			return eventstore.Lease{}, ctx.Err()
		case err != nil:
			c.log.WarnContext(ctx, "projection: acquiring the lease failed; retrying", slog.Any("error", err))
		case ok:
			c.stats.setLease(true)
			c.log.InfoContext(ctx, "projection: lease acquired", slog.String("holder", holder), slog.Uint64("fence", uint64(l.Fence)))
			return l, nil
		case !waiting:
			waiting = true
			c.log.InfoContext(ctx, "projection: lease held by another process; waiting",
				slog.String("holder", l.Holder), slog.Time("expires", l.Expires))
		}
		if err := backoff.Wait(ctx, ttl/5); err != nil {
			return eventstore.Lease{}, err
		}
	}
}

// keep renews the lease every third of its TTL until ctx ends, and cancels
// ctx with a [*eventstore.LeaseLostError] when it is lost, or when renewals
// keep failing until it would have lapsed.
func (c *Consumer) keep(ctx context.Context, cancel context.CancelCauseFunc, l eventstore.Lease) {
	ttl := c.opts.leaseTTL()
	ok := time.Now()
	for {
		if backoff.Wait(ctx, ttl/3) != nil {
			return
		}
		renewed, err := c.opts.Leases.RenewLease(ctx, l, ttl)
		if err == nil {
			l, ok = renewed, time.Now()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		c.log.WarnContext(ctx, "projection: renewing the lease failed", slog.Any("error", err))
		if errors.Is(err, eventstore.ErrLeaseLost) || time.Since(ok) >= ttl {
			c.stats.setLease(false)
			cancel(&eventstore.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence})
			return
		}
	}
}

// release gives the lease up, so that a waiting process takes over at
// once rather than after the TTL. It runs when ctx may have ended.
func (c *Consumer) release(ctx context.Context, l eventstore.Lease) {
	c.stats.setLease(false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.opts.Leases.ReleaseLease(ctx, l); err != nil {
		c.log.DebugContext(ctx, "projection: releasing the lease", slog.Any("error", err))
	}
}
