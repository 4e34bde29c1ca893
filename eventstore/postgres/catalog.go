package postgres

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	// streamsPage is larger: each page of streams reads the events table
	// (see below), so fewer pages cost fewer passes, and a row of a page
	// is a name of at most 512 bytes and three numbers.
	streamsPage = 10000
)

// The catalog lists in byte order, which is the "C" collation's, while
// the tables' text columns sort in the database's collation, so every
// comparison and order below names "C". The bounds are exact
// (storekit.NameRange), not LIKE patterns that a name's "%" or "_" would
// widen.
//
// The cost: the indexes on those columns are in the columns' own
// collation, which PostgreSQL does not use for a "C" comparison, even in
// a database whose default collation is "C" (EXPLAIN shows the range as
// a filter, not an index condition). So each page of streams (10,000
// names, so that a listing takes few) reads the events table whole (a sequential scan, a hash aggregate of the rows in
// the range and a sort of their streams) and then looks up each listed
// stream's last event in the (stream, version) index. An index on
// (stream COLLATE "C", version) would let it range instead; the schema
// has none, since every append would pay for it, and listing is for
// operators. The consumer and snapshot tables are small, and read alike.
//
// streamsSQL takes, of each stream in the range, its last version, and
// then the position of that event, its row's (tx_id, seq), as read.go
// makes it; the join names the column's own collation, which the index
// on (stream, version) is in.
const (
	streamsSQL      = streamsHead + `WHERE stream COLLATE "C" >= $1` + streamsTail
	streamsBelowSQL = streamsHead + `WHERE stream COLLATE "C" >= $1 AND stream COLLATE "C" < $3` + streamsTail
	streamsHead     = `SELECT l.stream, l.last, e.tx_id, e.seq FROM (
			SELECT stream COLLATE "C" AS stream, max(version) AS last FROM {{s}}.events `
	streamsTail = `
			GROUP BY 1 ORDER BY 1 LIMIT $2) l
		JOIN {{s}}.events e ON e.stream = l.stream COLLATE "default" AND e.version = l.last
		ORDER BY l.stream`
)

// Streams implements [storekit.Catalog.Streams], a page of names at a
// time.
func (s *Store) Streams(ctx context.Context, prefix, after string) iter.Seq2[storekit.StreamInfo, error] {
	return storekit.ListNames(ctx, prefix, after, func(i storekit.StreamInfo) string { return i.Name }, s.streamsPage, streamsPage)
}

func (s *Store) streamsPage(ctx context.Context, from, to string, limit int) ([]storekit.StreamInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	query, args := streamsSQL, []any{from, limit}
	if to != "" {
		query, args = streamsBelowSQL, append(args, to)
	}
	rows, err := s.pool.Query(ctx, s.fill(query), args...)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing streams from %q: %w", from, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storekit.StreamInfo, error) {
		var info storekit.StreamInfo
		var version, seq int64
		var txID uint64
		if err := row.Scan(&info.Name, &version, &txID, &seq); err != nil {
			return info, err
		}
		if version < 0 || seq < 0 {
			return info, fmt.Errorf("%w: stream %q, version %d: negative version or sequence (%d, %d)",
				eventstore.ErrCorrupt, info.Name, version, version, seq)
		}
		info.LastVersion, info.LastPosition = uint64(version), eventstore.Position{Major: txID, Minor: uint64(seq)}
		return info, nil
	})
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing streams from %q: %w", from, err))
	}
	return out, nil
}

// consumersSQL lists the consumers that have a checkpoint, a lease or dead
// letters, a page of names at a time from the three tables' keys, then
// joins what each keeps.
const consumersSQL = `WITH names AS (
		SELECT name FROM (
			SELECT name FROM {{s}}.checkpoints WHERE name COLLATE "C" >= $1
			UNION SELECT name FROM {{s}}.leases WHERE name COLLATE "C" >= $1
			UNION SELECT consumer FROM {{s}}.dead_letters WHERE consumer COLLATE "C" >= $1
		) u ORDER BY name COLLATE "C" LIMIT $2)
	SELECT n.name, c.major, c.minor, c.fence, c.updated_at, l.holder, l.fence, l.expires_at, d.count, d.oldest
	FROM names n
		LEFT JOIN {{s}}.checkpoints c ON c.name = n.name
		LEFT JOIN {{s}}.leases l ON l.name = n.name
		CROSS JOIN LATERAL (SELECT count(*) AS count, min(first_failure) AS oldest
			FROM {{s}}.dead_letters WHERE consumer = n.name) d
	ORDER BY n.name COLLATE "C"`

// Consumers implements [storekit.Catalog.Consumers]. OldestDeadLetter is
// the earliest first failure among the consumer's dead letters.
func (s *Store) Consumers(ctx context.Context) iter.Seq2[storekit.ConsumerInfo, error] {
	return storekit.ListNames(ctx, "", "", func(i storekit.ConsumerInfo) string { return i.Name }, s.consumersPage, catalogPage)
}

func (s *Store) consumersPage(ctx context.Context, from, _ string, limit int) ([]storekit.ConsumerInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.fill(consumersSQL), from, limit)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing consumers from %q: %w", from, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storekit.ConsumerInfo, error) {
		var c storekit.ConsumerInfo
		var major, minor, cpFence, leaseFence pgtype.Int8
		var saved, expires, oldest pgtype.Timestamptz
		var holder pgtype.Text
		var count int64
		if err := row.Scan(&c.Name, &major, &minor, &cpFence, &saved, &holder, &leaseFence, &expires, &count, &oldest); err != nil {
			return c, err
		}
		if c.HasCheckpoint = major.Valid; c.HasCheckpoint {
			if cpFence.Int64 < 0 {
				return c, fmt.Errorf("%w: the checkpoint of consumer %q has fence %d", eventstore.ErrCorrupt, c.Name, cpFence.Int64)
			}
			// Positions are kept as the bits of their uint64 halves.
			c.Checkpoint = storekit.Checkpoint{
				Position: eventstore.Position{Major: uint64(major.Int64), Minor: uint64(minor.Int64)},
				Fence:    storekit.Fence(cpFence.Int64),
			}
			c.CheckpointSaved = saved.Time.UTC()
		}
		if c.HasLease = holder.Valid; c.HasLease {
			var at time.Time // released: the zero time, lapsed
			if expires.Valid {
				at = expires.Time.UTC()
			}
			var err error
			if c.Lease, err = storekit.StoredLease(c.Name, holder.String, leaseFence.Int64, at); err != nil {
				return c, err
			}
		}
		c.DeadLetters = int(count)
		if oldest.Valid {
			c.OldestDeadLetter = oldest.Time.UTC()
		}
		return c, nil
	})
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing consumers from %q: %w", from, err))
	}
	return out, nil
}

// Snapshots implements [storekit.Catalog.Snapshots], from the table's key.
func (s *Store) Snapshots(ctx context.Context, after string) iter.Seq2[storekit.Snapshot, error] {
	return storekit.ListNames(ctx, "", after, func(snap storekit.Snapshot) string { return snap.Stream }, s.snapshotsPage, snapshotPage)
}

func (s *Store) snapshotsPage(ctx context.Context, from, _ string, limit int) ([]storekit.Snapshot, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.fill(`SELECT stream, version, type, schema_version, data, recorded_at
		FROM {{s}}.snapshots WHERE stream COLLATE "C" >= $1 ORDER BY stream COLLATE "C" LIMIT $2`), from, limit)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing snapshots from %q: %w", from, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storekit.Snapshot, error) {
		var snap storekit.Snapshot
		var version, schemaVersion int64
		if err := row.Scan(&snap.Stream, &version, &snap.Type, &schemaVersion, &snap.Data, &snap.RecordedAt); err != nil {
			return snap, err
		}
		if version < 0 || schemaVersion < 0 || schemaVersion > math.MaxUint32 {
			return snap, fmt.Errorf("%w: the snapshot of stream %q has version %d and schema version %d",
				eventstore.ErrCorrupt, snap.Stream, version, schemaVersion)
		}
		snap.Version, snap.SchemaVersion = uint64(version), uint32(schemaVersion)
		snap.RecordedAt = snap.RecordedAt.UTC()
		if snap.Data == nil {
			snap.Data = []byte{}
		}
		return snap, nil
	})
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing snapshots from %q: %w", from, err))
	}
	return out, nil
}

var _ storekit.Described = (*Store)(nil)

// Kind implements [storekit.Described]: a store opened is at this
// build's [SchemaVersion].
func (s *Store) Kind() (string, int) { return "postgres", SchemaVersion }
