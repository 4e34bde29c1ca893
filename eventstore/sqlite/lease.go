package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var (
	_ storekit.LeaseStore            = (*Store)(nil)
	_ storekit.TxLeaseStore[*sql.Tx] = (*Store)(nil)
)

// Leases are rows (name, holder, fence, expires_at) in the store's file.
// SQLite has no clock of its own: expires_at is compared with the clock of
// the process that writes, read inside the writer's transaction. Processes
// that share a file share a machine, and so a wall clock; a step of that
// clock (an NTP correction) moves every lease's expiry by as much. A lease
// is released by setting expires_at to NULL rather than by deleting the
// row: the row keeps the fence, which must never repeat.

// acquireLeaseSQL takes a free, expired or released lease, or renews the
// caller's own, in one statement, in a write transaction: no other writer
// runs between the read of the row and its update. The fence stays while
// one holder keeps the lease and grows by one on every change of hands, a
// release included.
const acquireLeaseSQL = `INSERT INTO cairn_leases AS l (name, holder, fence, expires_at) VALUES (?1, ?2, 1, ?3)
	ON CONFLICT (name) DO UPDATE SET
		fence = CASE WHEN l.holder = excluded.holder AND l.expires_at IS NOT NULL THEN l.fence ELSE l.fence + 1 END,
		holder = excluded.holder,
		expires_at = excluded.expires_at
	WHERE (l.holder = excluded.holder AND l.expires_at IS NOT NULL)
		OR l.expires_at IS NULL OR l.expires_at <= ?4
	RETURNING holder, fence, expires_at`

// AcquireLease implements [storekit.LeaseStore.AcquireLease], by the
// clock of this process (see the package's documentation of leases in
// docs/sqlite.md).
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	if err := storekit.ValidateLease(name, holder, ttl); err != nil {
		return storekit.Lease{}, false, err
	}
	var l storekit.Lease
	var got bool
	err := s.write(ctx, func(tx *writeTx) error {
		now := time.Now()
		l, got = storekit.Lease{}, false
		var err error
		l, err = scanLease(name, tx.conn.QueryRowContext(noInterrupt, acquireLeaseSQL, name, holder, now.Add(ttl).UnixNano(), now.UnixNano()))
		if err == nil {
			got = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Someone else holds it: report who.
		l, err = scanLease(name, tx.conn.QueryRowContext(noInterrupt, `SELECT holder, fence, expires_at FROM cairn_leases WHERE name = ?`, name))
		return err
	})
	if err != nil {
		return storekit.Lease{}, false, fmt.Errorf("sqlite: %q acquiring lease %q: %w", holder, name, err)
	}
	return l, got, nil
}

// RenewLease implements [storekit.LeaseStore.RenewLease]. It does not
// look at expires_at: a lapsed lease that nobody took is still the
// holder's, as the contract says.
func (s *Store) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	var renewed storekit.Lease
	err := s.write(ctx, func(tx *writeTx) error {
		var err error
		renewed, err = renewLease(tx.conn, l, ttl)
		return err
	})
	if err != nil && !errors.Is(err, eventstore.ErrLeaseLost) {
		return storekit.Lease{}, fmt.Errorf("sqlite: %q renewing lease %q: %w", l.Holder, l.Name, err)
	}
	return renewed, err
}

// RenewLeaseTx implements [storekit.TxLeaseStore.RenewLeaseTx]: the
// update of [Store.RenewLease] in tx, the transaction of a running
// [Store.InTx], which holds the file's one writer until it ends, so that
// no other holder can acquire the lease in between. A consumer that
// renews so in each batch keeps its lease through batches longer than its
// TTL, which its renewals through the writer would wait for.
func (s *Store) RenewLeaseTx(ctx context.Context, tx *sql.Tx, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return storekit.Lease{}, err
	}
	if tx == nil {
		return storekit.Lease{}, errNilTx
	}
	renewed, err := renewLease(tx, l, ttl)
	if err != nil && !errors.Is(err, eventstore.ErrLeaseLost) {
		return storekit.Lease{}, fmt.Errorf("sqlite: %q renewing lease %q in a transaction: %w", l.Holder, l.Name, err)
	}
	return renewed, err
}

// renewLease extends l by ttl in a write transaction. It does not look at
// expires_at (see RenewLease).
func renewLease(q querier, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	renewed, err := scanLease(l.Name, q.QueryRowContext(noInterrupt, `UPDATE cairn_leases SET expires_at = ?
		WHERE name = ? AND holder = ? AND fence = ? AND expires_at IS NOT NULL
		RETURNING holder, fence, expires_at`, time.Now().Add(ttl).UnixNano(), l.Name, l.Holder, l.Fence.Int64()))
	if errors.Is(err, sql.ErrNoRows) {
		return storekit.Lease{}, &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	return renewed, err
}

// ReleaseLease implements [storekit.LeaseStore.ReleaseLease].
func (s *Store) ReleaseLease(ctx context.Context, l storekit.Lease) error {
	if err := storekit.ValidateHeldLease(l); err != nil {
		return err
	}
	var n int64
	err := s.write(ctx, func(tx *writeTx) error {
		res, err := tx.conn.ExecContext(noInterrupt, `UPDATE cairn_leases SET expires_at = NULL
			WHERE name = ? AND holder = ? AND fence = ? AND expires_at IS NOT NULL`, l.Name, l.Holder, l.Fence.Int64())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: %q releasing lease %q: %w", l.Holder, l.Name, err)
	}
	if n == 0 {
		return &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	return nil
}

func scanLease(name string, row *sql.Row) (storekit.Lease, error) {
	var holder string
	var fence int64
	var expires sql.NullInt64
	if err := row.Scan(&holder, &fence, &expires); err != nil {
		return storekit.Lease{}, err
	}
	var at time.Time
	if expires.Valid {
		at = time.Unix(0, expires.Int64).UTC()
	}
	return storekit.StoredLease(name, holder, fence, at)
}
