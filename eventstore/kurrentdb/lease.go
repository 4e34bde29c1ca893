package kurrentdb

import (
	"context"
	"fmt"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.LeaseStore = (*Store)(nil)

// leaseRecord is the type of the records of a lease stream.
const leaseRecord = "cairn.lease"

// leaseFields is a lease as its stream keeps it: each acquire, renewal and
// release appends one, and the last is the lease. A released lease has no
// expiry; its record stays, with its fence, so that the next holder's
// fence is higher still: fences never repeat.
type leaseFields struct {
	Name    string         `json:"name"`
	Holder  string         `json:"holder"`
	Fence   storekit.Fence `json:"fence"`
	Expires time.Time      `json:"expires,omitzero"`
}

// AcquireLease implements [storekit.LeaseStore.AcquireLease].
//
// The stream "cairn:lease-<name>" keeps the last stateHistory changes of
// the lease. An acquire reads the last one and, when the lease is free,
// expired, released or the caller's own, appends the caller's at the
// revision it read; when another acquire came in between, KurrentDB
// refuses it, and it reads again and decides again. So of racing
// acquirers one wins, and the fence grows by one at every change of hands.
// An acquire costs a read and an append (a refused one only the read).
//
// Expiry is decided by the clocks of the processes that share the lease:
// KurrentDB has no clock a client can compare with in a conditional
// write. That is enough, because a lease is only for liveness (one
// process works, another takes over when it stops renewing): what keeps
// two holders from both applying effects is the fence, which checkpoint
// saves check in the store ([storekit.CheckSave]), whatever the clocks
// say. Clocks that disagree by more than a lease's TTL make take-overs
// early or late, never double.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	if err := storekit.ValidateLease(name, holder, ttl); err != nil {
		return storekit.Lease{}, false, err
	}
	if err := s.usable(ctx); err != nil {
		return storekit.Lease{}, false, err
	}
	for attempt := 1; ; attempt++ {
		cur, at, err := s.storedLease(ctx, name)
		if err != nil {
			return storekit.Lease{}, false, err
		}
		now := time.Now().UTC()
		held := cur != nil && !cur.Expires.IsZero()
		if held && cur.Holder != holder && now.Before(cur.Expires) {
			return leaseOf(*cur), false, nil
		}
		next := leaseFields{Name: name, Holder: holder, Fence: 1, Expires: now.Add(ttl)}
		switch {
		case held && cur.Holder == holder:
			next.Fence = cur.Fence // a renewal, lapsed or not
		case cur != nil:
			next.Fence = cur.Fence + 1
		}
		err = s.writeLease(ctx, at, next)
		if err == nil {
			return leaseOf(next), true, nil
		}
		if !isWrongVersion(err) {
			return storekit.Lease{}, false, err
		}
		if attempt == raceAttempts {
			return storekit.Lease{}, false, lostRace(fmt.Sprintf("%q acquiring lease %q", holder, name), attempt)
		}
	}
}

// RenewLease implements [storekit.LeaseStore.RenewLease]: a read and an
// append, at the revision read, of the lease with its new expiry. A lease
// that lapsed is renewed while no one else acquired it, as the contract
// says.
func (s *Store) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if err := s.usable(ctx); err != nil {
		return storekit.Lease{}, err
	}
	next := leaseFields{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	err := s.changeLease(ctx, l, func() leaseFields {
		next.Expires = time.Now().UTC().Add(ttl)
		return next
	})
	if err != nil {
		return storekit.Lease{}, err
	}
	return leaseOf(next), nil
}

// ReleaseLease implements [storekit.LeaseStore.ReleaseLease]: a read and
// an append, at the revision read, of the lease without an expiry, which
// keeps its fence for the next holder to pass.
func (s *Store) ReleaseLease(ctx context.Context, l storekit.Lease) error {
	if err := storekit.ValidateHeldLease(l); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	return s.changeLease(ctx, l, func() leaseFields {
		return leaseFields{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	})
}

// changeLease writes the lease that next returns in place of l, while l is
// the lease held now (lapsed or not); otherwise it returns a
// [*storekit.LeaseLostError].
func (s *Store) changeLease(ctx context.Context, l storekit.Lease, next func() leaseFields) error {
	for attempt := 1; ; attempt++ {
		cur, at, err := s.storedLease(ctx, l.Name)
		if err != nil {
			return err
		}
		if cur == nil || cur.Expires.IsZero() || cur.Holder != l.Holder || cur.Fence != l.Fence {
			return &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
		}
		err = s.writeLease(ctx, at, next())
		if !isWrongVersion(err) {
			return err
		}
		if attempt == raceAttempts {
			return lostRace(fmt.Sprintf("%q changing lease %q", l.Holder, l.Name), attempt)
		}
	}
}

// writeLease appends f to its lease's stream at at, setting the stream's
// $maxCount first when it is the lease's first record.
func (s *Store) writeLease(ctx context.Context, at esdb.ExpectedRevision, f leaseFields) error {
	stream := stateStream(leaseKind, f.Name)
	if _, first := at.(esdb.NoStream); first {
		if err := s.limitStream(ctx, stream, stateHistory); err != nil {
			return err
		}
	}
	_, err := s.appendRecords(ctx, stream, at, record{typ: leaseRecord, fields: f})
	return err
}

// storedLease reads the lease on name (nil when it was never acquired),
// and the expected revision of a write that replaces it.
func (s *Store) storedLease(ctx context.Context, name string) (*leaseFields, esdb.ExpectedRevision, error) {
	stream := stateStream(leaseKind, name)
	last, err := s.lastRecord(ctx, stream)
	if err != nil || last == nil {
		return nil, after(last), err
	}
	var f leaseFields
	if err := decodeRecord(stream, last, leaseRecord, &f); err != nil {
		return nil, nil, err
	}
	if f.Name != name || f.Holder == "" {
		return nil, nil, corruptRecord(stream, last, fmt.Sprintf("is a lease on %q held by %q", f.Name, f.Holder))
	}
	if _, err := storekit.StoredLease(name, f.Holder, f.Fence.Int64(), f.Expires); err != nil {
		return nil, nil, corruptRecord(stream, last, err.Error())
	}
	return &f, after(last), nil
}

// leaseOf is the lease that f records.
func leaseOf(f leaseFields) storekit.Lease {
	return storekit.Lease{Name: f.Name, Holder: f.Holder, Fence: f.Fence, Expires: f.Expires}
}
