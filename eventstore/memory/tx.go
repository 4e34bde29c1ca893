package memory

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Tx is a transaction of [Store]: reads see committed values and the
// transaction's own writes; writes, checkpoint moves, parked dead letters
// and dead-letter deletions become visible together when [Store.InTx]
// commits, or not at all. Isolation is read committed: of two transactions that write the
// same key at once, the last commit wins. A consumer's own batches never
// race (its checkpoint's compare-and-set fails one of them), but two
// consumers that share keys should not rely on it.
//
// A checkpoint moved in a transaction is locked until the transaction
// ends, as PostgreSQL locks its row: a second transaction that moves it
// waits, then sees the first one's move. Two consumers of one name (two
// deployments without a lease) therefore fail at their claim, before
// their handlers run, rather than at the commit, after.
type Tx struct {
	c        *consumers
	mu       sync.Mutex
	writes   map[string][]byte // a nil value is a deletion
	saves    []checkpointMove
	renewals []leaseRenewal
	parks    []eventstore.DeadLetter
	deletes  [][2]string // consumer, ID
	locked   map[string]chan struct{}
	done     bool
}

type checkpointMove struct {
	name           string
	expected, next eventstore.Position
	fence          storekit.Fence
}

type leaseRenewal struct {
	lease storekit.Lease
	ttl   time.Duration
}

// errTxDone guards against a handler that keeps its Tx past its callback.
var errTxDone = errors.New("memory: transaction already ended")

// Get returns the value of key as the transaction sees it.
func (tx *Tx) Get(key string) ([]byte, bool) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if v, ok := tx.writes[key]; ok {
		return append([]byte(nil), v...), v != nil
	}
	return tx.c.Value(key)
}

// Put sets key to a copy of value when the transaction commits.
func (tx *Tx) Put(key string, value []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.writes[key] = append(make([]byte, 0, len(value)), value...)
}

// Delete removes key when the transaction commits.
func (tx *Tx) Delete(key string) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.writes[key] = nil
}

// Value returns the committed value of key in the read model.
func (c *consumers) Value(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[key]
	return append([]byte(nil), v...), ok
}

// InTx implements [storekit.TxCheckpointStore.InTx]. The commit checks
// every checkpoint move and dead-letter deletion first, under one lock, and
// applies everything only when all of them hold.
func (c *consumers) InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	if err := c.usable(ctx); err != nil {
		return err
	}
	tx := &Tx{c: c, writes: make(map[string][]byte), locked: make(map[string]chan struct{})}
	// Deferred before fn runs, so that a panic in fn, which the caller may
	// recover, ends the transaction too: it keeps nothing, and the
	// checkpoints it locked are free for the next one.
	ended := false
	defer func() {
		if !ended {
			tx.mu.Lock()
			tx.done = true
			tx.unlockRows()
			tx.mu.Unlock()
		}
	}()
	err := fn(ctx, tx)
	ended = true
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.done = true
	defer tx.unlockRows() // after the commit below is applied, or on a rollback
	if err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	staged := make(map[string]storekit.Checkpoint)
	for _, m := range tx.saves {
		cur, ok := staged[m.name]
		if !ok {
			cur = c.checkpoints[m.name]
		}
		if err := storekit.CheckSave(m.name, cur, m.expected, m.fence); err != nil {
			return err
		}
		staged[m.name] = storekit.Checkpoint{Position: m.next, Fence: m.fence}
	}
	for _, d := range tx.deletes {
		if _, ok := c.dead[d[0]][d[1]]; !ok {
			return &storekit.DeadLetterNotFoundError{Consumer: d[0], ID: d[1]}
		}
	}
	for _, d := range tx.parks {
		if d.Generation != 0 {
			if err := c.parkableLocked(d); err != nil {
				return err
			}
		}
	}
	for _, r := range tx.renewals {
		if err := c.heldLocked(r.lease); err != nil {
			return err
		}
	}
	for _, r := range tx.renewals {
		c.renewLocked(r.lease, r.ttl)
	}
	for name, cp := range staged {
		c.checkpoints[name] = cp
	}
	for _, d := range tx.deletes {
		delete(c.dead[d[0]], d[1])
	}
	for _, d := range tx.parks {
		c.parkLocked(d)
	}
	for k, v := range tx.writes {
		if v == nil {
			delete(c.values, k)
		} else {
			c.values[k] = v
		}
	}
	return nil
}

// SaveCheckpointTx implements [storekit.TxCheckpointStore.SaveCheckpointTx].
// A move that would fail now fails at once; the commit checks it again.
func (c *consumers) SaveCheckpointTx(ctx context.Context, tx *Tx, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	if err := c.usable(ctx); err != nil {
		return err
	}
	if err := tx.lockRow(ctx, name); err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return errTxDone
	}
	cur, err := c.Checkpoint(ctx, name)
	if err != nil {
		return err
	}
	for _, m := range tx.saves {
		if m.name == name {
			cur = storekit.Checkpoint{Position: m.next, Fence: m.fence}
		}
	}
	if err := storekit.CheckSave(name, cur, expected, fence); err != nil {
		return err
	}
	tx.saves = append(tx.saves, checkpointMove{name: name, expected: expected, next: next, fence: fence})
	return nil
}

// lockRow takes the lock of row name for tx, waiting while another
// transaction holds it (until ctx ends: two transactions that move the
// same two checkpoints in opposite orders would wait for each other).
func (tx *Tx) lockRow(ctx context.Context, name string) error {
	tx.mu.Lock()
	_, held := tx.locked[name]
	done := tx.done
	tx.mu.Unlock()
	if done {
		return errTxDone
	}
	if held {
		return nil
	}
	row, err := tx.c.lockRow(ctx, name)
	if err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done { // the transaction ended while this waited
		<-row
		return errTxDone
	}
	tx.locked[name] = row
	return nil
}

// lettersRow names the lock of consumer's dead letters among the row
// locks, apart from its checkpoint's: no consumer name holds a control
// character.
func lettersRow(consumer string) string { return "\x00dead letters\x00" + consumer }

// lockLetters takes the lock of consumer's dead letters for tx, after the
// lock of its checkpoint, so that every transaction takes the two in the
// same order (a batch resolves dead letters before it moves the
// checkpoint; a retry after).
func (tx *Tx) lockLetters(ctx context.Context, consumer string) error {
	if err := tx.lockRow(ctx, consumer); err != nil {
		return err
	}
	return tx.lockRow(ctx, lettersRow(consumer))
}

// lockRow takes the lock of row name (a checkpoint, or a consumer's dead
// letters), waiting while a transaction holds it, until ctx ends, and
// returns it for the caller to release (<-row).
func (c *consumers) lockRow(ctx context.Context, name string) (chan struct{}, error) {
	c.mu.Lock()
	row, ok := c.rowLocks[name]
	if !ok {
		row = make(chan struct{}, 1)
		c.rowLocks[name] = row
	}
	c.mu.Unlock()
	select {
	case row <- struct{}{}:
		return row, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// unlockRows releases the checkpoint locks tx holds. The caller holds tx.mu.
func (tx *Tx) unlockRows() {
	for name, row := range tx.locked {
		<-row
		delete(tx.locked, name)
	}
}

// ParkDeadLetterTx implements [storekit.TxCheckpointStore.ParkDeadLetterTx]:
// the dead letter is stored when tx commits, under the ID it returns (the
// one already parked under its key, or a new one).
func (c *consumers) ParkDeadLetterTx(ctx context.Context, tx *Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetter(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := c.usable(ctx); err != nil {
		return eventstore.DeadLetter{}, err
	}
	// The lock of the consumer's dead letters keeps a delete outside
	// the transaction (a skip) from landing before the commit, which
	// would otherwise park it again under the ID it had.
	if err := tx.lockLetters(ctx, d.Consumer); err != nil {
		return eventstore.DeadLetter{}, err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return eventstore.DeadLetter{}, errTxDone
	}
	c.mu.Lock()
	err := c.parkableLocked(d)
	staged := d
	if err == nil {
		d = c.keyedLocked(d)
		if staged.Generation == 0 {
			// An upsert is staged under the ID it returns, and takes its
			// generation at the commit.
			staged = d
			staged.Generation = 0
		}
	}
	c.mu.Unlock()
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	// A compare-and-set is staged as asked, so that the commit checks it
	// again.
	tx.parks = append(tx.parks, staged)
	return copyLetter(d), nil
}

// RenewLeaseTx implements [storekit.TxLeaseStore.RenewLeaseTx]: the
// renewal is checked now and again at the commit, which fails if another
// holder acquired the lease meanwhile.
func (c *consumers) RenewLeaseTx(ctx context.Context, tx *Tx, l storekit.Lease, ttl time.Duration) (storekit.Lease, error) {
	if err := storekit.ValidateLease(l.Name, l.Holder, ttl); err != nil {
		return storekit.Lease{}, err
	}
	if err := c.usable(ctx); err != nil {
		return storekit.Lease{}, err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return storekit.Lease{}, errTxDone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.heldLocked(l); err != nil {
		return storekit.Lease{}, err
	}
	tx.renewals = append(tx.renewals, leaseRenewal{lease: l, ttl: ttl})
	renewed := c.leases[l.Name]
	renewed.Expires = c.now().Add(ttl)
	return renewed, nil
}

// DeleteDeadLetterTx implements [storekit.TxCheckpointStore.DeleteDeadLetterTx].
// Like a row lock in SQL, the transaction holds the consumer's dead
// letters from here to its end: a delete outside it (a skip) waits, and then finds the
// dead letter gone, rather than failing the commit of the transaction
// that handled its event.
func (c *consumers) DeleteDeadLetterTx(ctx context.Context, tx *Tx, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	if err := tx.lockLetters(ctx, consumer); err != nil {
		return err
	}
	if _, err := c.DeadLetter(ctx, consumer, id); err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return errTxDone
	}
	tx.deletes = append(tx.deletes, [2]string{consumer, id})
	return nil
}
