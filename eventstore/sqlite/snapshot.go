package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.SnapshotStore = (*Store)(nil)

// SaveSnapshot implements [storekit.SnapshotStore.SaveSnapshot] with one
// upsert in the writer's next transaction: the last save wins, whatever its
// version.
func (s *Store) SaveSnapshot(ctx context.Context, snap storekit.Snapshot) error {
	if err := storekit.ValidateSnapshot(snap); err != nil {
		return err
	}
	return s.write(ctx, func(tx *writeTx) error {
		_, err := tx.conn.ExecContext(noInterrupt, `INSERT INTO cairn_snapshots (stream, version, type, schema_version, data, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (stream) DO UPDATE SET version = excluded.version, type = excluded.type,
				schema_version = excluded.schema_version, data = excluded.data, recorded_at = excluded.recorded_at`,
			snap.Stream, int64(snap.Version), snap.Type, int64(snap.SchemaVersion), snap.Data, time.Now().UnixNano())
		if err != nil {
			return fmt.Errorf("sqlite: save the snapshot of stream %q at version %d: %w", snap.Stream, snap.Version, err)
		}
		return nil
	})
}

// LoadSnapshot implements [storekit.SnapshotStore.LoadSnapshot].
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (storekit.Snapshot, bool, error) {
	if err := storekit.ValidateStream(stream); err != nil {
		return storekit.Snapshot{}, false, err
	}
	if err := s.readable(ctx); err != nil {
		return storekit.Snapshot{}, false, err
	}
	snap := storekit.Snapshot{Stream: stream}
	var version, schemaVersion, recordedAt int64
	err := s.readers.QueryRowContext(noInterrupt, `SELECT version, type, schema_version, data, recorded_at
		FROM cairn_snapshots WHERE stream = ?`, stream).Scan(&version, &snap.Type, &schemaVersion, &snap.Data, &recordedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return storekit.Snapshot{}, false, nil
	}
	if err != nil {
		return storekit.Snapshot{}, false, s.readErr(ctx, err, "load the snapshot of stream "+quote(stream))
	}
	if version < 0 || schemaVersion < 0 || schemaVersion > math.MaxUint32 {
		// A snapshot is only an optimization, but a row that no store wrote
		// says something is wrong with the file: report it rather than
		// replay silently.
		return storekit.Snapshot{}, false, fmt.Errorf("%w: the snapshot of stream %q has version %d and schema version %d",
			eventstore.ErrCorrupt, stream, version, schemaVersion)
	}
	snap.Version, snap.SchemaVersion = uint64(version), uint32(schemaVersion)
	snap.RecordedAt = time.Unix(0, recordedAt).UTC()
	if snap.Data == nil {
		snap.Data = []byte{}
	}
	return snap, true, nil
}
