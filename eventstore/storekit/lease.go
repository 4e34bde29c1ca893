package storekit

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"

	"github.com/cairn-es/cairn/internal/clip"
)

// Lease is the right to run a named consumer, held by one process at a time
// until it expires or is released.
type Lease struct {
	// Name is the consumer's name.
	Name string
	// Holder identifies the process or consumer instance that holds it.
	Holder string
	// Fence grows by at least one every time the lease changes hands, and
	// stays the same while one holder renews it. Checkpoint saves carry it
	// (see [Fence]).
	Fence Fence
	// Expires is when the lease lapses unless renewed, by the store's clock.
	Expires time.Time
}

// StoredLease is the lease that a SQL store read back for name: its
// holder, its fence as the store keeps it (see [Fence.Int64]), and when it
// expires (the zero time once released: it has lapsed). A fence below 1,
// which no store writes, is reported as [eventstore.ErrCorrupt].
func StoredLease(name, holder string, fence int64, expires time.Time) (Lease, error) {
	if fence <= 0 {
		return Lease{}, fmt.Errorf("%w: lease %q has fence %d", eventstore.ErrCorrupt, name, fence)
	}
	return Lease{Name: name, Holder: holder, Fence: Fence(fence), Expires: expires}, nil
}

// LeaseLostError reports a renewal or release of a lease that the caller no
// longer holds: it expired and another holder acquired it, or it was
// released.
type LeaseLostError struct {
	Name   string
	Holder string
	Fence  Fence
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("lease %q: holder %q (fence %d) no longer holds it", e.Name, e.Holder, e.Fence)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == eventstore.ErrLeaseLost }

// LeaseStore hands out one lease per consumer name, so that of several
// processes running the same consumer only one applies effects.
//
// In SQL, a row per name (holder, fence, expires_at) updated with a
// conditional UPDATE that compares expires_at with the database's clock;
// the fence comes from the row and grows on every change of hands, even
// after a release, so it never repeats.
type LeaseStore interface {
	// AcquireLease takes the lease on name for holder, for ttl, when it is
	// free, expired, released, or already held by holder (then it renews it
	// and keeps its fence). It returns the lease and true, or, when another
	// holder has it, that holder's lease and false.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, bool, error)
	// RenewLease extends a held lease by ttl from now. A lease that lapsed
	// can be renewed while no one else has acquired it; otherwise the
	// result is a [*LeaseLostError].
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease gives a held lease up, so that a waiting process takes
	// over at once. Releasing a lease that is no longer held is a
	// [*LeaseLostError].
	ReleaseLease(ctx context.Context, l Lease) error
}

// TxLeaseStore is the hook of a [TxCheckpointStore] that also keeps leases:
// a consumer renews its lease inside a transaction, so that the lease check
// is part of that commit. The transaction's effects then commit only while
// the consumer holds the lease, whatever the time the transaction took,
// and the lease's life does not depend on renewals that may have to wait
// for transactions (SQLite's renewals wait for its one writer).
type TxLeaseStore[Tx any] interface {
	// RenewLeaseTx is [LeaseStore.RenewLease] inside tx: the renewal holds
	// when, and only when, tx commits, and tx commits only if the lease was
	// l's from the renewal to the commit. A lease that another holder has
	// acquired makes RenewLeaseTx, or else the commit, fail with a
	// [*LeaseLostError]; a store either keeps others from acquiring it
	// until tx ends (PostgreSQL locks its row, SQLite's writer is held) or
	// checks it again at the commit (memory).
	RenewLeaseTx(ctx context.Context, tx Tx, l Lease, ttl time.Duration) (Lease, error)
}

// Limits on lease requests, the same in every [LeaseStore].
const (
	// MinLeaseTTL is the shortest TTL a [LeaseStore] grants: a shorter lease
	// would lapse before its holder could use it.
	MinLeaseTTL = time.Millisecond
	// MaxLeaseTTL is the longest TTL a [LeaseStore] grants. A lease is how
	// soon a waiting process takes over from one that died, so a day is
	// already far more than any consumer needs; the bound also keeps every
	// expiry within the times that every store can hold (SQLite's Unix
	// nanoseconds end in 2262).
	MaxLeaseTTL = 24 * time.Hour
)

// ValidateLease checks a lease request as every [LeaseStore] does first: a
// valid consumer name, a valid holder (see [ValidateHeldLease]), and a TTL
// from [MinLeaseTTL] to [MaxLeaseTTL].
func ValidateLease(name, holder string, ttl time.Duration) error {
	if err := ValidateHeldLease(Lease{Name: name, Holder: holder}); err != nil {
		return err
	}
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Consumer: name, Index: -1, Field: "lease TTL", Reason: reason}
	}
	switch {
	case ttl < MinLeaseTTL:
		return bad(fmt.Sprintf("is %s, shorter than %s", ttl, MinLeaseTTL))
	case ttl > MaxLeaseTTL:
		return bad(fmt.Sprintf("is %s, longer than %s", ttl, MaxLeaseTTL))
	}
	return nil
}

// ValidateHeldLease checks the name and holder of a lease to renew or
// release, as every [LeaseStore] does first: a valid consumer name, and a
// holder that is not empty, at most [MaxStreamLen] bytes of valid UTF-8
// without NUL bytes (text that every store can hold).
func ValidateHeldLease(l Lease) error {
	if err := ValidateConsumerName(l.Name); err != nil {
		return err
	}
	bad := func(reason string) error {
		return &eventstore.InvalidArgumentError{Consumer: l.Name, Index: -1, Field: "lease holder", Reason: reason}
	}
	switch {
	case l.Holder == "":
		return bad("is empty")
	case len(l.Holder) > MaxStreamLen:
		return bad(fmt.Sprintf("is %d bytes long, more than the limit of %d", len(l.Holder), MaxStreamLen))
	case !names.StorableText(l.Holder):
		return bad(fmt.Sprintf("%s is not valid UTF-8 without NUL bytes", clip.Quote(l.Holder)))
	}
	return nil
}
