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

// Checkpoint implements [storekit.CheckpointStore.Checkpoint].
func (s *Store) Checkpoint(ctx context.Context, name string) (storekit.Checkpoint, error) {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return storekit.Checkpoint{}, err
	}
	if err := s.readable(ctx); err != nil {
		return storekit.Checkpoint{}, err
	}
	cp, err := readCheckpoint(s.readers, name)
	if err != nil {
		return storekit.Checkpoint{}, s.readErr(ctx, err, "read the checkpoint of consumer "+quote(name))
	}
	return cp, nil
}

// SaveCheckpoint implements [storekit.CheckpointStore.SaveCheckpoint]. The
// save joins the writer's next transaction, so the compare-and-set runs
// with no other writer, of this process or another, between its
// statements.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	return s.write(ctx, func(tx *writeTx) error {
		return saveCheckpoint(tx.conn, name, expected, next, fence)
	})
}

func readCheckpoint(q querier, name string) (storekit.Checkpoint, error) {
	var major, minor, fence int64
	err := q.QueryRowContext(noInterrupt, `SELECT major, minor, fence FROM cairn_checkpoints WHERE name = ?`, name).
		Scan(&major, &minor, &fence)
	if errors.Is(err, sql.ErrNoRows) {
		return storekit.Checkpoint{}, nil
	}
	if err != nil {
		return storekit.Checkpoint{}, err
	}
	if fence < 0 {
		return storekit.Checkpoint{}, fmt.Errorf("%w: the checkpoint of consumer %q has fence %d", eventstore.ErrCorrupt, name, fence)
	}
	// Positions are kept as the bits of their uint64 halves.
	return storekit.Checkpoint{
		Position: eventstore.Position{Major: uint64(major), Minor: uint64(minor)},
		Fence:    storekit.Fence(fence),
	}, nil
}

// saveCheckpoint is the compare-and-set of [storekit.CheckpointStore] in a
// write transaction (the writer's, or an InTx's, both BEGIN IMMEDIATE), so
// nothing changes the row between its statements: usually one UPDATE; when
// it matches nothing, the stored checkpoint says why, or, for a consumer
// without one, an INSERT creates it.
func saveCheckpoint(q execer, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	res, err := q.ExecContext(noInterrupt, `UPDATE cairn_checkpoints SET major = ?, minor = ?, fence = ?, updated_at = ?
		WHERE name = ? AND major = ? AND minor = ? AND fence <= ?`,
		int64(next.Major), int64(next.Minor), int64(fence), now,
		name, int64(expected.Major), int64(expected.Minor), int64(fence))
	if err != nil {
		return fmt.Errorf("sqlite: save the checkpoint of consumer %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	stored, err := readCheckpoint(q, name)
	if err != nil {
		return fmt.Errorf("sqlite: read the checkpoint of consumer %q: %w", name, err)
	}
	if err := storekit.CheckSave(name, stored, expected, fence); err != nil {
		return err
	}
	// No row yet, and expected is the start.
	_, err = q.ExecContext(noInterrupt, `INSERT INTO cairn_checkpoints (name, major, minor, fence, updated_at) VALUES (?, ?, ?, ?, ?)`,
		name, int64(next.Major), int64(next.Minor), int64(fence), now)
	if err != nil {
		return fmt.Errorf("sqlite: save the first checkpoint of consumer %q: %w", name, err)
	}
	return nil
}
