package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var (
	_ storekit.CheckpointStore           = (*Store)(nil)
	_ storekit.TxCheckpointStore[pgx.Tx] = (*Store)(nil)
)

// Checkpoint implements [storekit.CheckpointStore.Checkpoint].
func (s *Store) Checkpoint(ctx context.Context, name string) (storekit.Checkpoint, error) {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return storekit.Checkpoint{}, err
	}
	if err := s.checkOpen(); err != nil {
		return storekit.Checkpoint{}, err
	}
	cp, err := s.readCheckpoint(ctx, s.pool, name)
	if err != nil {
		return storekit.Checkpoint{}, s.closedOr(err)
	}
	return cp, nil
}

// SaveCheckpoint implements [storekit.CheckpointStore.SaveCheckpoint].
func (s *Store) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := storekit.ValidateConsumerName(name); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	return s.closedOr(s.saveCheckpoint(ctx, s.pool, name, expected, next, fence))
}

func (s *Store) readCheckpoint(ctx context.Context, q querier, name string) (storekit.Checkpoint, error) {
	var major, minor, fence int64
	err := q.QueryRow(ctx, s.fill(`SELECT major, minor, fence FROM {{s}}.checkpoints WHERE name = $1`), name).Scan(&major, &minor, &fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return storekit.Checkpoint{}, nil
	}
	if err != nil {
		return storekit.Checkpoint{}, fmt.Errorf("postgres: reading the checkpoint of consumer %q: %w", name, err)
	}
	if fence < 0 {
		return storekit.Checkpoint{}, fmt.Errorf("%w: the checkpoint of consumer %q has fence %d", eventstore.ErrCorrupt, name, fence)
	}
	return storekit.Checkpoint{
		Position: eventstore.Position{Major: uint64(major), Minor: uint64(minor)},
		Fence:    storekit.Fence(fence),
	}, nil
}

// saveCheckpoint is the compare-and-set of [storekit.CheckpointStore]:
// usually one UPDATE. Under READ COMMITTED an UPDATE that waited for a
// concurrent save checks its condition again on the row that save left, so
// of two saves from one position only one matches. When nothing matched,
// the stored checkpoint says why (storekit.CheckSave); when it says the
// save should have gone through, the row changed between the statements,
// and the save is tried again.
func (s *Store) saveCheckpoint(ctx context.Context, q querier, name string, expected, next eventstore.Position, fence storekit.Fence) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckFence(name, fence); err != nil {
		return err
	}
	for range maxRaces {
		tag, err := q.Exec(ctx, s.fill(`UPDATE {{s}}.checkpoints SET major = $2, minor = $3, fence = $4, updated_at = statement_timestamp()
			WHERE name = $1 AND major = $5 AND minor = $6 AND fence <= $4`),
			name, int64(next.Major), int64(next.Minor), int64(fence), int64(expected.Major), int64(expected.Minor))
		if err != nil {
			return fmt.Errorf("postgres: saving the checkpoint of consumer %q: %w", name, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		if expected.IsZero() {
			tag, err = q.Exec(ctx, s.fill(`INSERT INTO {{s}}.checkpoints (name, major, minor, fence) VALUES ($1, $2, $3, $4)
				ON CONFLICT (name) DO NOTHING`), name, int64(next.Major), int64(next.Minor), int64(fence))
			if err != nil {
				return fmt.Errorf("postgres: saving the first checkpoint of consumer %q: %w", name, err)
			}
			if tag.RowsAffected() == 1 {
				return nil
			}
		}
		stored, err := s.readCheckpoint(ctx, q, name)
		if err != nil {
			return err
		}
		if err := storekit.CheckSave(name, stored, expected, fence); err != nil {
			return err
		}
	}
	return fmt.Errorf("postgres: the checkpoint of consumer %q changed under its save %d times in a row", name, maxRaces)
}
