package projection_test

// A test-only implementation of the consumer contracts on database/sql and
// SQLite, so that the crash and two-process tests of projectiontest run on a
// store that outlives a process before the SQLite store provides its own.
// It is also the reference for the SQL that eventstore/sqlite and
// eventstore/postgres need: one statement per contract rule.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storetest"
	"github.com/cairn-es/cairn/projection/projectiontest"
)

const sqlSchema = `
CREATE TABLE IF NOT EXISTS checkpoints (
	name  TEXT PRIMARY KEY,
	major INTEGER NOT NULL, -- uint64 bits
	minor INTEGER NOT NULL,
	fence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
	consumer      TEXT NOT NULL,
	event_id      TEXT NOT NULL,
	part          INTEGER NOT NULL,
	id            TEXT NOT NULL UNIQUE,
	event         BLOB NOT NULL, -- JSON of eventstore.Event
	error         TEXT NOT NULL,
	attempts      INTEGER NOT NULL,
	first_failure INTEGER NOT NULL, -- Unix nanoseconds
	last_failure  INTEGER NOT NULL,
	PRIMARY KEY (consumer, event_id, part)
);
CREATE TABLE IF NOT EXISTS leases (
	name    TEXT PRIMARY KEY,
	holder  TEXT NOT NULL,
	fence   INTEGER NOT NULL,
	expires INTEGER NOT NULL -- Unix nanoseconds; 0 once released
);
CREATE TABLE IF NOT EXISTS counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL);
`

type sqlConsumers struct{ db *sql.DB }

type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func openSQLConsumers(t testing.TB, path string) *sqlConsumers {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(sqlSchema)
	require.NoError(t, err)
	return &sqlConsumers{db: db}
}

var _ projectiontest.ConsumerStore[*sql.Tx] = (*sqlConsumers)(nil)

func (s *sqlConsumers) Checkpoint(ctx context.Context, name string) (eventstore.Checkpoint, error) {
	if err := eventstore.ValidateConsumerName(name); err != nil {
		return eventstore.Checkpoint{}, err
	}
	return readCheckpoint(ctx, s.db, name)
}

func readCheckpoint(ctx context.Context, q querier, name string) (eventstore.Checkpoint, error) {
	var major, minor, fence int64
	err := q.QueryRowContext(ctx, `SELECT major, minor, fence FROM checkpoints WHERE name = ?`, name).Scan(&major, &minor, &fence)
	if errors.Is(err, sql.ErrNoRows) {
		return eventstore.Checkpoint{}, nil
	}
	return eventstore.Checkpoint{Position: eventstore.Position{Major: uint64(major), Minor: uint64(minor)}, Fence: eventstore.Fence(fence)}, err
}

func (s *sqlConsumers) SaveCheckpoint(ctx context.Context, name string, expected, next eventstore.Position, fence eventstore.Fence) error {
	return s.save(ctx, s.db, name, expected, next, fence)
}

func (s *sqlConsumers) save(ctx context.Context, q querier, name string, expected, next eventstore.Position, fence eventstore.Fence) error {
	if err := eventstore.ValidateConsumerName(name); err != nil {
		return err
	}
	for range 3 {
		res, err := q.ExecContext(ctx, `UPDATE checkpoints SET major = ?, minor = ?, fence = ?
			WHERE name = ? AND major = ? AND minor = ? AND fence <= ?`,
			int64(next.Major), int64(next.Minor), int64(fence), name, int64(expected.Major), int64(expected.Minor), int64(fence))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		if expected.IsZero() {
			res, err = q.ExecContext(ctx, `INSERT INTO checkpoints (name, major, minor, fence) VALUES (?, ?, ?, ?)
				ON CONFLICT (name) DO NOTHING`, name, int64(next.Major), int64(next.Minor), int64(fence))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				return nil
			}
		}
		cur, err := readCheckpoint(ctx, q, name)
		if err != nil {
			return err
		}
		if err := eventstore.CheckSave(name, cur, expected, fence); err != nil {
			return err
		}
		// The row changed between the statements: decide again.
	}
	return fmt.Errorf("checkpoint %q keeps changing under the save", name)
}

func (s *sqlConsumers) InTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *sqlConsumers) SaveCheckpointTx(ctx context.Context, tx *sql.Tx, name string, expected, next eventstore.Position, fence eventstore.Fence) error {
	return s.save(ctx, tx, name, expected, next, fence)
}

func (s *sqlConsumers) DeleteDeadLetterTx(ctx context.Context, tx *sql.Tx, consumer, id string) error {
	return deleteLetter(ctx, tx, consumer, id)
}

func (s *sqlConsumers) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := eventstore.CheckDeadLetter(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	event, err := json.Marshal(d.Event)
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	var id string
	var first int64
	err = s.db.QueryRowContext(ctx, `UPDATE dead_letters SET error = ?, attempts = ?, last_failure = ?
		WHERE consumer = ? AND event_id = ? AND part = ? RETURNING id, first_failure`,
		d.Error, d.Attempts, d.LastFailure.UnixNano(), d.Consumer, d.Event.ID.String(), d.Part).Scan(&id, &first)
	if err == nil {
		d.ID, d.FirstFailure = id, time.Unix(0, first).UTC()
		return d, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return eventstore.DeadLetter{}, err
	}
	if d.ID == "" {
		d.ID = ulid.Make().String()
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO dead_letters
		(consumer, event_id, part, id, event, error, attempts, first_failure, last_failure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.Consumer, d.Event.ID.String(), d.Part, d.ID, event, d.Error, d.Attempts, d.FirstFailure.UnixNano(), d.LastFailure.UnixNano())
	return d, err
}

func scanLetter(scan func(...any) error) (eventstore.DeadLetter, error) {
	var d eventstore.DeadLetter
	var event []byte
	var first, last int64
	if err := scan(&d.ID, &d.Consumer, &d.Part, &event, &d.Error, &d.Attempts, &first, &last); err != nil {
		return d, err
	}
	d.FirstFailure, d.LastFailure = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
	return d, json.Unmarshal(event, &d.Event)
}

const letterColumns = `id, consumer, part, event, error, attempts, first_failure, last_failure`

func (s *sqlConsumers) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return func(yield func(eventstore.DeadLetter, error) bool) {
		if err := eventstore.ValidateConsumerName(consumer); err != nil {
			yield(eventstore.DeadLetter{}, err)
			return
		}
		rows, err := s.db.QueryContext(ctx, `SELECT `+letterColumns+` FROM dead_letters WHERE consumer = ? ORDER BY id`, consumer)
		if err != nil {
			yield(eventstore.DeadLetter{}, err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanLetter(rows.Scan)
			if !yield(d, err) || err != nil {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(eventstore.DeadLetter{}, err)
		}
	}
}

func (s *sqlConsumers) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := eventstore.ValidateConsumerName(consumer); err != nil {
		return eventstore.DeadLetter{}, err
	}
	d, err := scanLetter(s.db.QueryRowContext(ctx, `SELECT `+letterColumns+` FROM dead_letters WHERE consumer = ? AND id = ?`, consumer, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return eventstore.DeadLetter{}, &eventstore.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return d, err
}

func (s *sqlConsumers) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	if err := eventstore.ValidateConsumerName(consumer); err != nil {
		return 0, err
	}
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM dead_letters WHERE consumer = ?`, consumer).Scan(&n)
	return n, err
}

func (s *sqlConsumers) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	if err := eventstore.ValidateConsumerName(consumer); err != nil {
		return err
	}
	return deleteLetter(ctx, s.db, consumer, id)
}

func deleteLetter(ctx context.Context, q querier, consumer, id string) error {
	res, err := q.ExecContext(ctx, `DELETE FROM dead_letters WHERE consumer = ? AND id = ?`, consumer, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &eventstore.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return nil
}

func (s *sqlConsumers) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (eventstore.Lease, bool, error) {
	if err := eventstore.ValidateConsumerName(name); err != nil {
		return eventstore.Lease{}, false, err
	}
	now := time.Now()
	l := eventstore.Lease{Name: name}
	var expires int64
	// The fence stays while the holder keeps its lease and grows on every
	// change of hands, a release included.
	err := s.db.QueryRowContext(ctx, `INSERT INTO leases (name, holder, fence, expires) VALUES (?1, ?2, 1, ?3)
		ON CONFLICT (name) DO UPDATE SET
			fence = CASE WHEN holder = excluded.holder AND expires > 0 THEN fence ELSE fence + 1 END,
			holder = excluded.holder, expires = excluded.expires
		WHERE (holder = excluded.holder AND expires > 0) OR expires <= ?4
		RETURNING holder, fence, expires`, name, holder, now.Add(ttl).UnixNano(), now.UnixNano()).Scan(&l.Holder, &l.Fence, &expires)
	if err == nil {
		l.Expires = time.Unix(0, expires).UTC()
		return l, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return eventstore.Lease{}, false, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT holder, fence, expires FROM leases WHERE name = ?`, name).Scan(&l.Holder, &l.Fence, &expires)
	l.Expires = time.Unix(0, expires).UTC()
	return l, false, err
}

func (s *sqlConsumers) RenewLease(ctx context.Context, l eventstore.Lease, ttl time.Duration) (eventstore.Lease, error) {
	expires := time.Now().Add(ttl)
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET expires = ? WHERE name = ? AND holder = ? AND fence = ? AND expires > 0`,
		expires.UnixNano(), l.Name, l.Holder, int64(l.Fence))
	if err != nil {
		return eventstore.Lease{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return eventstore.Lease{}, &eventstore.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	l.Expires = expires.UTC()
	return l, nil
}

func (s *sqlConsumers) ReleaseLease(ctx context.Context, l eventstore.Lease) error {
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET expires = 0 WHERE name = ? AND holder = ? AND fence = ? AND expires > 0`,
		l.Name, l.Holder, int64(l.Fence))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &eventstore.LeaseLostError{Name: l.Name, Holder: l.Holder, Fence: l.Fence}
	}
	return nil
}

func sqliteHarness() projectiontest.Harness[*sql.Tx] {
	open := func(t testing.TB, dir string) projectiontest.Stores[*sql.Tx] {
		events, err := sqlite.Open(context.Background(), filepath.Join(dir, "events.db"),
			sqlite.Options{Synchronous: sqlite.SyncNormal, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = events.Close() })
		return projectiontest.Stores[*sql.Tx]{Events: events, Consumers: openSQLConsumers(t, filepath.Join(dir, "consumers.db"))}
	}
	return projectiontest.Harness[*sql.Tx]{
		New:  func(t *testing.T) projectiontest.Stores[*sql.Tx] { return open(t, t.TempDir()) },
		Open: open,
		Add: func(ctx context.Context, tx *sql.Tx, key string, delta int64) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, ?)
				ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, key, delta)
			return err
		},
		Get: func(t testing.TB, s projectiontest.Stores[*sql.Tx], key string) int64 {
			var n int64
			err := s.Consumers.(*sqlConsumers).db.QueryRow(`SELECT n FROM counters WHERE key = ?`, key).Scan(&n)
			if errors.Is(err, sql.ErrNoRows) {
				return 0
			}
			require.NoError(t, err)
			return n
		},
	}
}

func TestSQLiteProjections(t *testing.T) {
	projectiontest.Run(t, sqliteHarness())
}

// The reference SQL passes the contract suites too.
func TestSQLiteContracts(t *testing.T) {
	open := func(t *testing.T) *sqlConsumers { return openSQLConsumers(t, filepath.Join(t.TempDir(), "c.db")) }
	t.Run("Checkpoints", func(t *testing.T) {
		storetest.RunCheckpoints(t, func(t *testing.T) eventstore.CheckpointStore { return open(t) })
	})
	t.Run("DeadLetters", func(t *testing.T) {
		storetest.RunDeadLetters(t, func(t *testing.T) eventstore.DeadLetterStore { return open(t) })
	})
	t.Run("Leases", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) eventstore.LeaseStore { return open(t) })
	})
}
