package memory

import (
	"context"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// consumers is the part of [Store] that its consumers keep besides the
// events: checkpoints, dead letters and leases, and a small key/value read
// model that transactional projections write to in the same transaction as
// their checkpoint (see [Store.InTx]). It has a lock of its own, so that
// consumers never wait for appends, nor appends for consumers.
type consumers struct {
	closing
	mu          sync.Mutex
	checkpoints map[string]storekit.Checkpoint
	dead        map[string]map[string]eventstore.DeadLetter // consumer -> ID -> dead letter
	leases      map[string]storekit.Lease
	fences      map[string]storekit.Fence // highest fence ever handed out, per name
	values      map[string][]byte
	rowLocks    map[string]chan struct{} // per checkpoint, and per consumer's dead letters (lettersRow): held by the transaction that writes them
	now         func() time.Time
}

func (c *consumers) init(done <-chan struct{}) {
	*c = consumers{
		closing:     closing{done},
		checkpoints: make(map[string]storekit.Checkpoint),
		dead:        make(map[string]map[string]eventstore.DeadLetter),
		leases:      make(map[string]storekit.Lease),
		fences:      make(map[string]storekit.Fence),
		values:      make(map[string][]byte),
		rowLocks:    make(map[string]chan struct{}),
		now:         func() time.Time { return time.Now().UTC() },
	}
}

// Checkpoint implements [storekit.CheckpointStore.Checkpoint].
func (c *consumers) Checkpoint(ctx context.Context, name string) (storekit.Checkpoint, error) {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return storekit.Checkpoint{}, err
	}
	if err := c.usable(ctx); err != nil {
		return storekit.Checkpoint{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpoints[name], nil
}

// SaveCheckpoint implements [storekit.CheckpointStore.SaveCheckpoint].
func (c *consumers) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saveLocked(name, expected, next, fence)
}

func (c *consumers) saveLocked(name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.CheckSave(name, c.checkpoints[name], expected, fence); err != nil {
		return err
	}
	c.checkpoints[name] = storekit.Checkpoint{Position: next, Fence: fence}
	return nil
}

// ParkDeadLetter implements [storekit.DeadLetterStore.ParkDeadLetter].
func (c *consumers) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetter(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := c.usable(ctx); err != nil {
		return eventstore.DeadLetter{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.parkableLocked(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	return copyLetter(c.parkLocked(d)), nil
}

// parkableLocked refuses a dead letter whose ID names another event's dead
// letter (see [storekit.CheckDeadLetterID]), or, for a compare-and-set
// (d.Generation set), one that changed since it was read (see
// [storekit.CheckDeadLetterGeneration]).
func (c *consumers) parkableLocked(d eventstore.DeadLetter) error {
	old, ok := c.dead[d.Consumer][d.ID]
	if d.Generation != 0 {
		var stored *storekit.DeadLetterKey
		if ok {
			k := storekit.KeyOf(old)
			stored = &k
		}
		return storekit.CheckDeadLetterGeneration(d, stored)
	}
	if ok && d.ID != "" {
		return storekit.CheckDeadLetterID(d, old.Event.StreamID, old.Event.ID, old.Part)
	}
	return nil
}

// keyedLocked prepares d to be stored: with the ID and first failure of
// the dead letter already parked under its key (consumer, stream, event
// ID, part), so that parking it again updates that one, and one more
// generation than it has; or else a new ID when it has none, and the
// first generation; and with its own copy of the event's data. The stored
// event stays, as SQL stores update only the failure's columns.
func (c *consumers) keyedLocked(d eventstore.DeadLetter) eventstore.DeadLetter {
	d.Generation = 1
	for id, old := range c.dead[d.Consumer] {
		if old.Event.ID == d.Event.ID && old.Event.StreamID == d.Event.StreamID && old.Part == d.Part {
			d.ID, d.FirstFailure, d.Generation, d.Event = id, old.FirstFailure, old.Generation+1, old.Event
			break
		}
	}
	if d.ID == "" {
		d.ID = ulid.Make().String()
	}
	d.Event.EventData = d.Event.EventData.Clone()
	return d
}

// parkLocked stores d, or updates the dead letter parked under its key,
// and returns what it stored.
func (c *consumers) parkLocked(d eventstore.DeadLetter) eventstore.DeadLetter {
	if c.dead[d.Consumer] == nil {
		c.dead[d.Consumer] = make(map[string]eventstore.DeadLetter)
	}
	d = c.keyedLocked(d)
	c.dead[d.Consumer][d.ID] = d
	return d
}

// DeadLetters implements [storekit.DeadLetterStore.DeadLetters].
func (c *consumers) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return storekit.ListSeq(func() ([]eventstore.DeadLetter, error) {
		if err := c.readable(ctx, consumer); err != nil {
			return nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		letters := c.dead[consumer]
		out := make([]eventstore.DeadLetter, 0, len(letters))
		for _, id := range slices.Sorted(maps.Keys(letters)) {
			out = append(out, copyLetter(letters[id]))
		}
		return out, nil
	})
}

// readable checks what a read of consumer's dead letters is asked with.
func (c *consumers) readable(ctx context.Context, consumer string) error {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return err
	}
	return c.usable(ctx)
}

// DeadLetterKeys implements [storekit.DeadLetterStore.DeadLetterKeys].
func (c *consumers) DeadLetterKeys(ctx context.Context, consumer string, after, through eventstore.Position) iter.Seq2[storekit.DeadLetterKey, error] {
	return storekit.ListSeq(func() ([]storekit.DeadLetterKey, error) {
		if err := c.readable(ctx, consumer); err != nil {
			return nil, err
		}
		c.mu.Lock()
		var keys []storekit.DeadLetterKey
		for _, d := range c.dead[consumer] {
			keys = append(keys, storekit.KeyOf(d))
		}
		c.mu.Unlock()
		return storekit.SortDeadLetterKeys(keys, after, through), nil
	})
}

// DeadLetter implements [storekit.DeadLetterStore.DeadLetter].
func (c *consumers) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := c.usable(ctx); err != nil {
		return eventstore.DeadLetter{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dead[consumer][id]
	if !ok {
		return eventstore.DeadLetter{}, &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return copyLetter(d), nil
}

// CountDeadLetters implements [storekit.DeadLetterStore.CountDeadLetters].
func (c *consumers) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	if err := c.readable(ctx, consumer); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dead[consumer]), nil
}

// DeleteDeadLetter implements [storekit.DeadLetterStore.DeleteDeadLetter].
func (c *consumers) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	// It waits for a transaction that parks or resolves the consumer's
	// dead letters (see [Store.DeleteDeadLetterTx]).
	row, err := c.lockRow(ctx, lettersRow(consumer))
	if err != nil {
		return err
	}
	defer func() { <-row }()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(consumer, id)
}

func (c *consumers) deleteLocked(consumer, id string) error {
	if _, ok := c.dead[consumer][id]; !ok {
		return &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	delete(c.dead[consumer], id)
	return nil
}

func copyLetter(d eventstore.DeadLetter) eventstore.DeadLetter {
	d.Event.EventData = d.Event.EventData.Clone()
	return d
}

// AcquireLease implements [storekit.LeaseStore.AcquireLease].
func (c *consumers) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (storekit.Lease, bool, error) {
	if err := storekit.ValidateLease(name, holder, ttl); err != nil {
		return storekit.Lease{}, false, err
	}
	if err := c.usable(ctx); err != nil {
		return storekit.Lease{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	l, held := c.leases[name]
	if held && l.Holder != holder && now.Before(l.Expires) {
		return l, false, nil
	}
	if !held || l.Holder != holder || released(l) {
		c.fences[name]++
		l = storekit.Lease{Name: name, Holder: holder, Fence: c.fences[name]}
	}
	l.Expires = now.Add(ttl)
	c.leases[name] = l
	return l, true, nil
}

// RenewLease implements [storekit.LeaseStore.RenewLease].
func (c *consumers) RenewLease(ctx context.Context, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if err := c.usable(ctx); err != nil {
		return storekit.Lease{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.heldLocked(l); err != nil {
		return storekit.Lease{}, err
	}
	return c.renewLocked(l, ttl), nil
}

// heldLocked returns a [*storekit.LeaseLostError] unless l is the lease
// held now (lapsed or not, while nobody else acquired it).
func (c *consumers) heldLocked(l storekit.Lease) error {
	cur, held := c.leases[l.Name]
	if !held || cur.Holder != l.Holder || cur.Fence != l.Fence || released(cur) {
		return &storekit.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	return nil
}

// renewLocked extends the held lease l by ttl from now.
func (c *consumers) renewLocked(l storekit.Lease, ttl time.Duration) storekit.Lease {
	cur := c.leases[l.Name]
	cur.Expires = c.now().Add(ttl)
	c.leases[l.Name] = cur
	return cur
}

// ReleaseLease implements [storekit.LeaseStore.ReleaseLease].
func (c *consumers) ReleaseLease(ctx context.Context, l storekit.Lease) error {
	if err := storekit.ValidateHeldLease(l); err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.heldLocked(l); err != nil {
		return err
	}
	// The lease stays, lapsed, as SQL stores keep its row: the catalog
	// lists it (see [Store.Consumers]), and its next holder's fence is
	// one more, as a change of hands' always is.
	cur := c.leases[l.Name]
	cur.Expires = time.Time{}
	c.leases[l.Name] = cur
	return nil
}

// released reports a lease given up by [consumers.ReleaseLease]: it
// expires at the zero time, as a released lease reads in SQL stores, and
// nobody holds it, not even its last holder.
func released(l storekit.Lease) bool { return l.Expires.IsZero() }
