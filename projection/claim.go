package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// errClaimLost is the cause with which a retry's context is cancelled when
// its claim on the dead letter could not be renewed: another retry may
// take the dead letter once the claim lapses, so this one must stop.
var errClaimLost = errors.New("the retry's claim on the dead letter could not be renewed")

// errClaimLapsing rolls back a retry's transaction that would commit after
// its claim could have lapsed.
var errClaimLapsing = errors.New("the retry's claim on the dead letter is about to lapse")

// letterClaim is a retry's claim on the dead letter it runs on: the dead
// letter parked again with ClaimedUntil set, by a compare-and-set on the
// generation the retry read, and renewed every third of the claim's life
// while the retry runs. A second retry that reads the dead letter
// meanwhile finds it claimed and is refused; one that read it before the
// claim loses the compare-and-set. The claim of a retry that crashed
// lapses after [Options.LeaseTTL], and the dead letter can be retried
// again.
type letterClaim struct {
	c      *Consumer
	ttl    time.Duration
	cancel context.CancelCauseFunc
	stop   chan struct{}
	kept   chan struct{}
	ended  sync.Once

	mu     sync.Mutex
	letter eventstore.DeadLetter // as last stored
}

// claimedElsewhere refuses a dead letter, as read, that another retry
// claims now: every retry checks it before it does anything with the
// dead letter, even one that will only record that its event does not
// decode.
func (c *Consumer) claimedElsewhere(d eventstore.DeadLetter) error {
	if !d.ClaimedUntil.After(time.Now()) {
		return nil
	}
	return &RetryRefusedError{Consumer: c.name, ID: d.ID, Reason: fmt.Sprintf(
		"another retry claims it until %s", d.ClaimedUntil.UTC().Format(time.RFC3339Nano))}
}

// claimLetter claims d, as read, for a retry, and returns the context that the
// retry runs in: cancelled, with a cause matching errClaimLost, when the
// claim cannot be renewed. The caller must end the claim.
func (c *Consumer) claimLetter(ctx context.Context, d eventstore.DeadLetter) (context.Context, *letterClaim, error) {
	if err := c.claimedElsewhere(d); err != nil {
		return nil, nil, err
	}
	ttl := c.opts.leaseTTL()
	d.ClaimedUntil = time.Now().Add(ttl).UTC()
	claimed, err := c.opts.DeadLetters.ParkDeadLetter(ctx, d)
	switch {
	case errors.Is(err, eventstore.ErrDeadLetterNotFound):
		return nil, nil, err // resolved or skipped since it was read: the error says so
	case errors.Is(err, eventstore.ErrDeadLetterChanged):
		return nil, nil, &RetryRefusedError{Consumer: c.name, ID: d.ID,
			Reason: "another retry, or a failure the consumer recorded, changed the dead letter since it was read", Err: err}
	case err != nil:
		return nil, nil, fmt.Errorf("consumer %q: claiming dead letter %q for its retry: %w", c.name, d.ID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	k := &letterClaim{c: c, ttl: ttl, cancel: cancel, stop: make(chan struct{}), kept: make(chan struct{}), letter: claimed}
	go k.keep(ctx)
	return ctx, k, nil
}

// keep renews the claim until the retry ends it. It stops the retry when
// the dead letter changed under it (an operator skipped it, or the claim
// lapsed and another retry took it), and, unless the retry's transaction
// resolves the dead letter itself, when no renewal succeeded by a fifth of
// the TTL before the claim would lapse (a renewal that hangs is abandoned
// then): after that another retry may take it. A retry whose transaction
// resolves the dead letter in its own store needs no claim to apply once
// (of two such transactions one deletes it, and the other's delete fails),
// so its renewals may wait as long as they must (behind its own
// transaction, on SQLite).
func (k *letterClaim) keep(ctx context.Context) {
	defer close(k.kept)
	bounded := !k.c.exec.ownsLetters()
	wait := k.ttl / 3
	for {
		k.mu.Lock()
		d := k.letter
		k.mu.Unlock()
		stop := k.stopBy(d)
		if bounded {
			wait = min(wait, time.Until(stop))
		}
		select {
		case <-k.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if bounded && !time.Now().Before(stop) {
			k.cancel(fmt.Errorf("%w: no renewal succeeded before %s", errClaimLost, stop.Format(time.RFC3339Nano)))
			return
		}
		d.ClaimedUntil = time.Now().Add(k.ttl).UTC()
		rctx, done := ctx, context.CancelFunc(func() {})
		if bounded {
			rctx, done = context.WithDeadline(ctx, stop)
		}
		renewed, err := k.c.opts.DeadLetters.ParkDeadLetter(rctx, d)
		done()
		if err == nil {
			k.mu.Lock()
			k.letter = renewed
			k.mu.Unlock()
			wait = k.ttl / 3
			continue
		}
		if ctx.Err() != nil {
			return
		}
		k.c.log.WarnContext(ctx, "projection: renewing a retry's claim on its dead letter failed",
			slog.String("dead_letter", d.ID), slog.Any("error", err))
		if errors.Is(err, eventstore.ErrDeadLetterChanged) || errors.Is(err, eventstore.ErrDeadLetterNotFound) {
			k.cancel(fmt.Errorf("%w: %w", errClaimLost, err))
			return
		}
		wait = k.ttl / 10 // try again soon: the top of the loop gives up at the stop time
	}
}

// holds reports whether the claim still holds, with a fifth of the TTL to
// spare: a retry whose transaction commits apart from the dead letter
// checks it last, so that it never commits after another retry could
// have taken the dead letter.
func (k *letterClaim) holds() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Now().Before(k.stopBy(k.letter))
}

// stopBy is when a retry holding claim d must stop: a fifth of the TTL
// before the claim lapses.
func (k *letterClaim) stopBy(d eventstore.DeadLetter) time.Time {
	return d.ClaimedUntil.Add(-k.ttl / 5)
}

// end stops the renewals, once, and returns the dead letter as last
// stored. The context that claim returned is cancelled after it.
func (k *letterClaim) end() eventstore.DeadLetter {
	k.ended.Do(func() {
		close(k.stop)
		<-k.kept
		k.cancel(nil)
	})
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.letter
}

// release ends the claim of a retry that applied nothing, unless it
// ended already: it clears the claim (a compare-and-set, which changes
// nothing when the dead letter changed meanwhile), so that the dead letter
// can be retried at once rather than after the claim lapses.
func (k *letterClaim) release(ctx context.Context) {
	select {
	case <-k.stop:
		return
	default:
	}
	d := k.end()
	d.ClaimedUntil = time.Time{}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.ttl/5)
	defer cancel()
	if _, err := k.c.opts.DeadLetters.ParkDeadLetter(ctx, d); err != nil && !errors.Is(err, eventstore.ErrDeadLetterChanged) {
		k.c.log.WarnContext(ctx, "projection: clearing a retry's claim on its dead letter failed; it lapses by itself",
			slog.String("dead_letter", d.ID), slog.Time("claimed_until", d.ClaimedUntil), slog.Any("error", err))
	}
}

// claimLost reports a retry whose claim could not be renewed.
func claimLost(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errClaimLost)
}
