package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.Catalog = (*Store)(nil)

// Page sizes of the catalog's listings. A stream or consumer row is small;
// a snapshot holds its state, up to storekit.MaxEventSize, so fewer of
// them make a page.
const (
	catalogPage  = 512
	snapshotPage = 32
)

// streamsSQL lists streams from cairn_events_stream_version, the
// (stream, version) index: SQLite walks the index over the range of names
// and reads no row of the table, since position is the rowid, which every
// index entry holds. It reads every entry of the streams it lists (one per
// event), a cost that grows with their events, not with the log. The
// range is of TEXT in BINARY collation, byte order, which is the order
// the catalog lists in; the bounds are exact (storekit.NameRange), not
// LIKE patterns that a name's "%" or "_" would widen.
const (
	streamsSQL = `SELECT stream, max(version), max(position) FROM cairn_events
		WHERE stream >= ?1 GROUP BY stream ORDER BY stream LIMIT ?2`
	streamsBelowSQL = `SELECT stream, max(version), max(position) FROM cairn_events
		WHERE stream >= ?1 AND stream < ?3 GROUP BY stream ORDER BY stream LIMIT ?2`
)

// Streams implements [storekit.Catalog.Streams], a page of names at a
// time from the consumer read pool.
func (s *Store) Streams(ctx context.Context, prefix, after string) iter.Seq2[storekit.StreamInfo, error] {
	return storekit.ListNames(ctx, prefix, after, func(i storekit.StreamInfo) string { return i.Name }, s.streamsPage, catalogPage)
}

func (s *Store) streamsPage(ctx context.Context, from, to string, limit int) ([]storekit.StreamInfo, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	query, args := streamsSQL, []any{from, limit}
	if to != "" {
		query, args = streamsBelowSQL, append(args, to)
	}
	const what = "list streams"
	rows, err := s.readers.QueryContext(noInterrupt, query, args...)
	if err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	defer rows.Close()
	var out []storekit.StreamInfo
	for rows.Next() {
		var name string
		var version, position int64
		if err := rows.Scan(&name, &version, &position); err != nil {
			return nil, s.readErr(ctx, err, what)
		}
		if version < 0 || position <= 0 {
			return nil, &CorruptError{Stream: name, Version: uint64(version), Position: uint64(position), Field: "position",
				Reason: "the stream's last event has a negative version or a position below 1"}
		}
		out = append(out, storekit.StreamInfo{Name: name, LastVersion: uint64(version), LastPosition: eventstore.Position{Major: uint64(position)}})
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	return out, nil
}

// consumersSQL lists the consumers that have a checkpoint, a lease or dead
// letters, from each table's key (name, or the dead letters' (consumer,
// ...)), a page of names at a time, then joins what each keeps.
const consumersSQL = `WITH names(name) AS (
		SELECT name FROM cairn_checkpoints WHERE name >= ?1
		UNION SELECT name FROM cairn_leases WHERE name >= ?1
		UNION SELECT DISTINCT consumer FROM cairn_dead_letters WHERE consumer >= ?1
		ORDER BY 1 LIMIT ?2)
	SELECT n.name, c.major, c.minor, c.fence, c.updated_at, l.holder, l.fence, l.expires_at,
		(SELECT count(*) FROM cairn_dead_letters d WHERE d.consumer = n.name),
		(SELECT min(first_failure) FROM cairn_dead_letters d WHERE d.consumer = n.name)
	FROM names n
		LEFT JOIN cairn_checkpoints c ON c.name = n.name
		LEFT JOIN cairn_leases l ON l.name = n.name
	ORDER BY n.name`

// Consumers implements [storekit.Catalog.Consumers]. OldestDeadLetter is
// the earliest first failure among the consumer's dead letters.
func (s *Store) Consumers(ctx context.Context) iter.Seq2[storekit.ConsumerInfo, error] {
	return storekit.ListNames(ctx, "", "", func(i storekit.ConsumerInfo) string { return i.Name }, s.consumersPage, catalogPage)
}

func (s *Store) consumersPage(ctx context.Context, from, _ string, limit int) ([]storekit.ConsumerInfo, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	const what = "list consumers"
	rows, err := s.readers.QueryContext(noInterrupt, consumersSQL, from, limit)
	if err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	defer rows.Close()
	var out []storekit.ConsumerInfo
	for rows.Next() {
		var c storekit.ConsumerInfo
		var major, minor, cpFence, saved, leaseFence, expires, oldest sql.NullInt64
		var holder sql.NullString
		if err := rows.Scan(&c.Name, &major, &minor, &cpFence, &saved, &holder, &leaseFence, &expires, &c.DeadLetters, &oldest); err != nil {
			return nil, s.readErr(ctx, err, what)
		}
		if c.HasCheckpoint = major.Valid; c.HasCheckpoint {
			if cpFence.Int64 < 0 {
				return nil, fmt.Errorf("%w: the checkpoint of consumer %q has fence %d", eventstore.ErrCorrupt, c.Name, cpFence.Int64)
			}
			// Positions are kept as the bits of their uint64 halves.
			c.Checkpoint = storekit.Checkpoint{
				Position: eventstore.Position{Major: uint64(major.Int64), Minor: uint64(minor.Int64)},
				Fence:    storekit.Fence(cpFence.Int64),
			}
			c.CheckpointSaved = time.Unix(0, saved.Int64).UTC()
		}
		if c.HasLease = holder.Valid; c.HasLease {
			var at time.Time // released: the zero time, lapsed
			if expires.Valid {
				at = time.Unix(0, expires.Int64).UTC()
			}
			if c.Lease, err = storekit.StoredLease(c.Name, holder.String, leaseFence.Int64, at); err != nil {
				return nil, err
			}
		}
		if c.DeadLetters > 0 {
			c.OldestDeadLetter = time.Unix(0, oldest.Int64).UTC()
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	return out, nil
}

// Snapshots implements [storekit.Catalog.Snapshots], from the table's key.
func (s *Store) Snapshots(ctx context.Context, after string) iter.Seq2[storekit.Snapshot, error] {
	return storekit.ListNames(ctx, "", after, func(snap storekit.Snapshot) string { return snap.Stream }, s.snapshotsPage, snapshotPage)
}

func (s *Store) snapshotsPage(ctx context.Context, from, _ string, limit int) ([]storekit.Snapshot, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	const what = "list snapshots"
	rows, err := s.readers.QueryContext(noInterrupt, `SELECT stream, version, type, schema_version, data, recorded_at
		FROM cairn_snapshots WHERE stream >= ? ORDER BY stream LIMIT ?`, from, limit)
	if err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	defer rows.Close()
	var out []storekit.Snapshot
	for rows.Next() {
		var snap storekit.Snapshot
		var version, schemaVersion, recordedAt int64
		if err := rows.Scan(&snap.Stream, &version, &snap.Type, &schemaVersion, &snap.Data, &recordedAt); err != nil {
			return nil, s.readErr(ctx, err, what)
		}
		if version < 0 || schemaVersion < 0 || schemaVersion > math.MaxUint32 {
			return nil, fmt.Errorf("%w: the snapshot of stream %q has version %d and schema version %d",
				eventstore.ErrCorrupt, snap.Stream, version, schemaVersion)
		}
		snap.Version, snap.SchemaVersion = uint64(version), uint32(schemaVersion)
		snap.RecordedAt = time.Unix(0, recordedAt).UTC()
		if snap.Data == nil {
			snap.Data = []byte{}
		}
		out = append(out, snap)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	return out, nil
}

var _ storekit.Described = (*Store)(nil)

// Kind implements [storekit.Described]: a store opened is at this
// build's [SchemaVersion].
func (s *Store) Kind() (string, int) { return "sqlite", SchemaVersion }
