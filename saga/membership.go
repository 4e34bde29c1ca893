package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/backoff"
	"github.com/cairn-es/cairn/projection"
)

// Membership: how the processes running one saga type split its segments
// with nothing but the lease contract (acquire, renew, release).
//
// There are as many member slots as segments, each a lease. A process
// takes the lowest free slot and keeps it as any lease; it learns who else
// is alive by asking for the other slots' leases with the shortest TTL: a
// slot held by another process is refused (and changes nothing), a free
// one is granted for a millisecond, and lapses. Ranked by slot,
// the live members split the segments by index modulo their count. A
// process that joins is counted by the others within a third of a TTL; the
// slot of one that dies lapses, and the others count it out.
//
// Ownership is only for efficiency. The segment consumers hold their own
// leases with fencing, so that while the members' views differ (for a
// third of a TTL) a segment is run by at most one process, and a slow
// former owner can never move a checkpoint; and were two processes to step
// one instance at once, its watermarks and the appends' expected versions
// would still make one effect.

// memberLease is a member slot this process holds.
type memberLease struct {
	slot  int
	lease storekit.Lease
	since time.Time // when the request that granted or renewed it was sent
}

// memberName is the name of member slot j of n.
func (r *Runner[S]) memberName(j int) string {
	return fmt.Sprintf("%s%s:member-%d/%d", StreamPrefix, r.e.t.name, j, r.segments)
}

// leaseTTL is the TTL of the runner's leases, as its consumers count it.
func (r *Runner[S]) leaseTTL() time.Duration {
	if r.opts.LeaseTTL > 0 {
		return r.opts.LeaseTTL
	}
	return projection.DefaultLeaseTTL
}

// claimSegments keeps a member slot and runs this process's share of the
// segments until ctx ends, then gives the slot up.
func (r *Runner[S]) claimSegments(ctx context.Context, runs *segmentRuns) {
	holder := r.opts.Holder
	if holder == "" {
		holder = ulid.Make().String()
	}
	ttl := r.leaseTTL()
	log := r.e.log.With(slog.String("saga", r.e.t.name), slog.String("holder", holder))
	var mine *memberLease
	none := make([]bool, r.segments)
	share, members := none, 0
	defer func() {
		runs.assign(none)
		if mine != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = r.opts.Leases.ReleaseLease(rctx, mine.lease)
		}
	}()
	full := false
	for {
		wait := ttl / 3
		var err error
		if mine, err = r.keepSlot(ctx, mine, holder, ttl); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.WarnContext(ctx, "saga: keeping the member lease failed", slog.Any("error", err))
			wait = ttl / 10
		}
		want := share
		switch {
		case mine == nil:
			// No slot (all taken, or ours lapsed): the others count this
			// process out, so it runs nothing until it has one again.
			want, members = none, 0
			if !full && err == nil {
				full = true
				log.InfoContext(ctx, "saga: every member slot is taken; this process waits for one", slog.Int("slots", r.segments))
			}
		default:
			full = false
			live, perr := r.probe(ctx, mine.slot, holder)
			if perr != nil {
				if ctx.Err() != nil {
					return
				}
				log.WarnContext(ctx, "saga: counting the members failed; keeping this process's share", slog.Any("error", perr))
				wait = ttl / 10
				break
			}
			members = len(live)
			want = shareOf(r.segments, slices.Index(live, mine.slot), members)
		}
		if !slices.Equal(want, share) {
			runs.assign(want)
			share = want
			log.InfoContext(ctx, "saga: this process's segments changed", slog.Any("segments", runs.held()),
				slog.Int("of", r.segments), slog.Int("members", members))
		}
		if backoff.Wait(ctx, wait) != nil {
			return
		}
	}
}

// keepSlot renews the member slot held (mine), or takes the lowest free
// one. It returns nil when it holds none: every slot is taken, or the one
// held was lost, or could not be renewed before another process may count
// it out.
func (r *Runner[S]) keepSlot(ctx context.Context, mine *memberLease, holder string, ttl time.Duration) (*memberLease, error) {
	if mine != nil {
		since := time.Now()
		l, err := r.opts.Leases.RenewLease(ctx, mine.lease, ttl)
		switch {
		case err == nil:
			return &memberLease{slot: mine.slot, lease: l, since: since}, nil
		case errors.Is(err, eventstore.ErrLeaseLost):
			mine = nil // taken over while this process stalled: take a slot again
		case time.Since(mine.since) >= ttl-ttl/5:
			return nil, err // the others may count this process out by now
		default:
			return mine, err
		}
	}
	for j := range r.segments {
		since := time.Now()
		l, ok, err := r.opts.Leases.AcquireLease(ctx, r.memberName(j), holder, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			return &memberLease{slot: j, lease: l, since: since}, nil
		}
	}
	return nil, nil
}

// probe returns the slots of the live members, this one's included,
// ascending: a slot whose lease another process holds is live; a free one
// is granted for the shortest TTL, and lapses.
func (r *Runner[S]) probe(ctx context.Context, mine int, holder string) ([]int, error) {
	live := []int{mine}
	for j := range r.segments {
		if j == mine {
			continue
		}
		_, ok, err := r.opts.Leases.AcquireLease(ctx, r.memberName(j), holder, storekit.MinLeaseTTL)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			live = append(live, j)
		default:
			// A free slot, granted for the shortest TTL: it lapses at once
			// (a release would cost one more write).
		}
	}
	slices.Sort(live)
	return live, nil
}
