package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	_ storekit.LeaseStore           = (*Store)(nil)
	_ storekit.TxLeaseStore[pgx.Tx] = (*Store)(nil)
)

// Leases are rows (name, holder, fence, expires_at), decided by the
// database's clock alone, so that the clocks of the processes that compete
// do not matter. A lease is released by setting expires_at to NULL rather
// than by deleting the row: the row keeps the fence, which must never
// repeat. docs/postgres.md explains why there is no advisory lock.

// acquireLeaseSQL takes a free, expired or released lease, or renews the
// caller's own, in one statement. ON CONFLICT locks the row and evaluates
// the WHERE on its latest version, so of racing acquirers exactly one
// matches; the fence stays while one holder keeps the lease and grows by
// one on every change of hands, a release included.
const acquireLeaseSQL = `INSERT INTO {{s}}.leases AS l (name, holder, fence, expires_at)
	VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET
		fence = CASE WHEN l.holder = excluded.holder AND l.expires_at IS NOT NULL THEN l.fence ELSE l.fence + 1 END,
		holder = excluded.holder,
		expires_at = excluded.expires_at
	WHERE (l.holder = excluded.holder AND l.expires_at IS NOT NULL)
		OR l.expires_at IS NULL OR l.expires_at <= clock_timestamp()
	RETURNING holder, fence, expires_at`

// AcquireLease implements [storekit.LeaseStore.AcquireLease].
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	if err := storekit.ValidateLease(name, holder, ttl); err != nil {
		return storekit.Lease{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return storekit.Lease{}, false, err
	}
	l, err := s.scanLease(name, s.pool.QueryRow(ctx, s.fill(acquireLeaseSQL), name, holder, ttl.Microseconds()))
	if err == nil {
		return l, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return storekit.Lease{}, false, s.closedOr(fmt.Errorf("postgres: %q acquiring lease %q: %w", holder, name, err))
	}
	// Someone else holds it: report who. The row may have changed since,
	// which only makes the answer older; the caller tries again later.
	l, err = s.scanLease(name, s.pool.QueryRow(ctx, s.fill(`SELECT holder, fence, expires_at FROM {{s}}.leases WHERE name = $1`), name))
	if err != nil {
		return storekit.Lease{}, false, s.closedOr(fmt.Errorf("postgres: reading lease %q: %w", name, err))
	}
	return l, false, nil
}

// RenewLease implements [storekit.LeaseStore.RenewLease]. It does not
// look at expires_at: a lapsed lease that nobody took is still the
// holder's, as the contract says.
func (s *Store) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return storekit.Lease{}, err
	}
	return s.renewLease(ctx, s.pool, l, ttl)
}

// RenewLeaseTx implements [storekit.TxLeaseStore.RenewLeaseTx]: the
// update of [Store.RenewLease] in tx, which locks the lease's row until tx
// ends, so that an acquire by another holder waits for it and then finds
// the lease renewed (or, after a rollback, as it was).
func (s *Store) RenewLeaseTx(ctx context.Context, tx pgx.Tx, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if tx == nil {
		return storekit.Lease{}, errNilTx
	}
	return s.renewLease(ctx, tx, l, ttl)
}

func (s *Store) renewLease(ctx context.Context, q querier, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	renewed, err := s.scanLease(l.Name, q.QueryRow(ctx, s.fill(`UPDATE {{s}}.leases
		SET expires_at = clock_timestamp() + $4 * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND fence = $3 AND expires_at IS NOT NULL
		RETURNING holder, fence, expires_at`), l.Name, l.Holder, l.Fence.Int64(), ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return storekit.Lease{}, &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	if err != nil {
		return storekit.Lease{}, s.closedOr(fmt.Errorf("postgres: %q renewing lease %q: %w", l.Holder, l.Name, err))
	}
	return renewed, nil
}

// ReleaseLease implements [storekit.LeaseStore.ReleaseLease].
func (s *Store) ReleaseLease(ctx context.Context, l storekit.Lease) error {
	if err := storekit.ValidateHeldLease(l); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.fill(`UPDATE {{s}}.leases SET expires_at = NULL
		WHERE name = $1 AND holder = $2 AND fence = $3 AND expires_at IS NOT NULL`), l.Name, l.Holder, l.Fence.Int64())
	if err != nil {
		return s.closedOr(fmt.Errorf("postgres: %q releasing lease %q: %w", l.Holder, l.Name, err))
	}
	if tag.RowsAffected() == 0 {
		return &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	return nil
}

func (s *Store) scanLease(name string, row pgx.Row) (storekit.Lease, error) {
	var holder string
	var fence int64
	var expires pgtype.Timestamptz
	if err := row.Scan(&holder, &fence, &expires); err != nil {
		return storekit.Lease{}, err
	}
	var at time.Time
	if expires.Valid {
		at = expires.Time.UTC()
	}
	return storekit.StoredLease(name, holder, fence, at)
}
