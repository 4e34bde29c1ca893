package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.SnapshotStore = (*Store)(nil)

// fill puts the store's quoted schema into a statement of the consumer and
// aggregate tables. It runs per call, which costs one small allocation next
// to a round trip to the server; pgx caches the prepared statement by text.
func (s *Store) fill(sql string) string {
	return strings.ReplaceAll(sql, "{{s}}", pgx.Identifier{s.schema}.Sanitize())
}

// SaveSnapshot implements [storekit.SnapshotStore.SaveSnapshot] with one
// upsert: the last save wins, whatever its version.
func (s *Store) SaveSnapshot(ctx context.Context, snap storekit.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.ValidateSnapshot(snap); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, s.fill(`INSERT INTO {{s}}.snapshots (stream, version, type, schema_version, data)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (stream) DO UPDATE SET version = excluded.version, type = excluded.type,
			schema_version = excluded.schema_version, data = excluded.data, recorded_at = excluded.recorded_at`),
		snap.Stream, int64(snap.Version), snap.Type, int64(snap.SchemaVersion), snap.Data)
	if err != nil {
		return s.closedOr(fmt.Errorf("postgres: saving the snapshot of stream %q at version %d: %w", snap.Stream, snap.Version, err))
	}
	return nil
}

// LoadSnapshot implements [storekit.SnapshotStore.LoadSnapshot].
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (storekit.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return storekit.Snapshot{}, false, err
	}
	if err := storekit.ValidateStream(stream); err != nil {
		return storekit.Snapshot{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return storekit.Snapshot{}, false, err
	}
	snap := storekit.Snapshot{Stream: stream}
	var version, schemaVersion int64
	err := s.pool.QueryRow(ctx, s.fill(`SELECT version, type, schema_version, data, recorded_at
		FROM {{s}}.snapshots WHERE stream = $1`), stream).Scan(&version, &snap.Type, &schemaVersion, &snap.Data, &snap.RecordedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return storekit.Snapshot{}, false, nil
	}
	if err != nil {
		return storekit.Snapshot{}, false, s.closedOr(fmt.Errorf("postgres: loading the snapshot of stream %q: %w", stream, err))
	}
	if version < 0 || schemaVersion < 0 || schemaVersion > math.MaxUint32 {
		// A snapshot is only an optimization, but a row that no store wrote
		// says something is wrong with the schema: report it rather than
		// replay silently.
		return storekit.Snapshot{}, false, fmt.Errorf("%w: the snapshot of stream %q has version %d and schema version %d",
			eventstore.ErrCorrupt, stream, version, schemaVersion)
	}
	snap.Version, snap.SchemaVersion = uint64(version), uint32(schemaVersion)
	snap.RecordedAt = snap.RecordedAt.UTC()
	if snap.Data == nil {
		snap.Data = []byte{}
	}
	return snap, true, nil
}
