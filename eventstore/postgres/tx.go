package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// InTx implements [storekit.TxCheckpointStore.InTx]: fn runs in one
// transaction of the store's pool, at READ COMMITTED, which commits when fn
// returns nil. A read model in the same database, written through tx,
// commits with the checkpoint that [Store.SaveCheckpointTx] moves, or not
// at all. fn may also append events with [Store.AppendTx] on tx; call
// [Store.Notify] after InTx returns so that subscribers need not wait for
// their next poll.
//
// fn's error is returned as it is, after the rollback. The checkpoint's
// row stays locked from SaveCheckpointTx until the end of the transaction,
// so a second consumer that saves the same checkpoint waits, then fails.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.closedOr(fmt.Errorf("postgres: beginning a transaction: %w", err))
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// Also when fn panics, so that the connection goes back to the pool
		// clean. Rolling back must not depend on ctx: a canceled ctx is a
		// common reason for fn's failure.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return s.closedOr(fmt.Errorf("postgres: committing a transaction: %w", err))
	}
	committed = true
	return nil
}

// rollbackTimeout bounds the rollback of a failed InTx.
const rollbackTimeout = 10 * time.Second

// SaveCheckpointTx implements [storekit.TxCheckpointStore.SaveCheckpointTx].
// The move is visible to others when tx commits; until then the row is
// locked.
func (s *Store) SaveCheckpointTx(ctx context.Context, tx pgx.Tx, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if tx == nil {
		return errNilTx
	}
	return s.closedOr(s.saveCheckpoint(ctx, tx, name, expected, next, fence))
}

// DeleteDeadLetterTx implements [storekit.TxCheckpointStore.DeleteDeadLetterTx].
func (s *Store) DeleteDeadLetterTx(ctx context.Context, tx pgx.Tx, consumer, id string) error {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return err
	}
	if tx == nil {
		return errNilTx
	}
	return s.closedOr(s.deleteDeadLetter(ctx, tx, consumer, id))
}

var errNilTx = errors.New("postgres: nil transaction")
