package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.DeadLetterStore = (*Store)(nil)

// letterColumns are the columns that scanLetter reads, in its order: the
// letter's own, the minor half of the event's position, then the event's
// in the order of decodeEvent.
const letterColumns = `id, consumer, part, error, attempts, first_failure, last_failure, generation, claimed_until, minor,
	position, stream, version, event_id, type, schema_version, data, correlation_id, causation_id, command_id, extra, recorded_at`

// ParkDeadLetter implements [storekit.DeadLetterStore.ParkDeadLetter] with
// one upsert on (consumer, stream, event_id, part): parking the same part
// again updates the error, attempts and last failure, adds a generation,
// and returns the ID and first failure that were stored first. With
// d.Generation set it is one conditional update instead.
func (s *Store) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	var parked eventstore.DeadLetter
	err := storekit.CheckDeadLetter(d)
	if err == nil {
		err = s.write(ctx, func(tx *writeTx) error {
			parked, err = parkDeadLetter(tx.conn, d)
			return err
		})
	}
	return parked, err
}

// ParkDeadLetterTx implements [storekit.TxCheckpointStore.ParkDeadLetterTx]:
// the upsert of [Store.ParkDeadLetter] in tx, the transaction of a running
// [Store.InTx].
func (s *Store) ParkDeadLetterTx(ctx context.Context, tx *sql.Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetter(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := ctx.Err(); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if tx == nil {
		return eventstore.DeadLetter{}, errNilTx
	}
	return parkDeadLetter(tx, d)
}

// parkDeadLetter runs the upsert of a checked dead letter in a write
// transaction, or its compare-and-set.
func parkDeadLetter(q querier, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if d.Generation != 0 {
		return reparkDeadLetter(q, d)
	}
	e := d.Event
	extra, err := encodeExtra(e.Metadata.Extra)
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	if d.ID == "" {
		d.ID = ulid.Make().String()
	} else if err := letterIDFree(q, d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	data := e.Data
	if data == nil {
		data = []byte{}
	}
	var id string
	var first, generation int64
	err = q.QueryRowContext(noInterrupt, `INSERT INTO cairn_dead_letters AS l (consumer, event_id, part, id,
			position, minor, stream, version, type, schema_version, data, correlation_id, causation_id, command_id,
			extra, recorded_at, error, attempts, first_failure, last_failure, claimed_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (consumer, stream, event_id, part) DO UPDATE SET
			error = excluded.error, attempts = excluded.attempts, last_failure = excluded.last_failure,
			claimed_until = excluded.claimed_until, generation = l.generation + 1
		RETURNING id, first_failure, generation`,
		d.Consumer, e.ID[:], d.Part, d.ID,
		int64(e.Position.Major), int64(e.Position.Minor), e.StreamID, int64(e.Version), e.Type, int64(e.SchemaVersion), data,
		nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID),
		extra, unixNanos(e.RecordedAt), d.Error, d.Attempts, unixNanos(d.FirstFailure), unixNanos(d.LastFailure),
		unixNanos(d.ClaimedUntil),
	).Scan(&id, &first, &generation)
	if err != nil {
		return eventstore.DeadLetter{}, parkErr(d, err)
	}
	d.ID = id
	return parked(d, first, generation), nil
}

// reparkDeadLetter is the compare-and-set of a park with d.Generation set:
// one update of the dead letter d.ID at that generation, or, when it
// matches nothing, the reason read in the same write transaction.
func reparkDeadLetter(q querier, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	e := d.Event
	var first, generation int64
	err := q.QueryRowContext(noInterrupt, `UPDATE cairn_dead_letters SET
			error = ?, attempts = ?, last_failure = ?, claimed_until = ?, generation = generation + 1
		WHERE consumer = ? AND id = ? AND generation = ? AND stream = ? AND event_id = ? AND part = ?
		RETURNING first_failure, generation`,
		d.Error, d.Attempts, unixNanos(d.LastFailure), unixNanos(d.ClaimedUntil),
		d.Consumer, d.ID, int64(d.Generation), e.StreamID, e.ID[:], d.Part,
	).Scan(&first, &generation)
	if errors.Is(err, sql.ErrNoRows) {
		stored, err := storedKey(q, d.Consumer, d.ID)
		if err == nil {
			err = storekit.CheckDeadLetterGeneration(d, stored)
		}
		return eventstore.DeadLetter{}, err
	}
	if err != nil {
		return eventstore.DeadLetter{}, parkErr(d, err)
	}
	return parked(d, first, generation), nil
}

func parkErr(d eventstore.DeadLetter, err error) error {
	e := d.Event
	return fmt.Errorf("sqlite: consumer %q parking event %s (stream %q, version %d, type %q): %w",
		d.Consumer, e.ID, e.StreamID, e.Version, e.Type, err)
}

// parked is d as a park stored it, with the first failure and generation
// the store returned.
func parked(d eventstore.DeadLetter, first, generation int64) eventstore.DeadLetter {
	d.FirstFailure, d.Generation = fromUnixNanos(first), uint64(generation)
	d.LastFailure, d.ClaimedUntil = d.LastFailure.UTC(), d.ClaimedUntil.UTC()
	d.Event.EventData = d.Event.EventData.Clone()
	return d
}

// letterIDFree refuses d when its ID names another event's dead letter:
// the unique key on (consumer, id) would refuse the insert with a bare
// constraint error. It runs in the write transaction of the insert, so
// nothing comes in between.
func letterIDFree(q querier, d eventstore.DeadLetter) error {
	stored, err := storedKey(q, d.Consumer, d.ID)
	if err != nil || stored == nil {
		return err
	}
	return storekit.CheckDeadLetterID(d, stored.Stream, stored.EventID, stored.Part)
}

// keyColumns are the columns that scanKey reads, in its order.
const keyColumns = `id, stream, event_id, part, position, minor, generation`

// storedKey reads the key of consumer's dead letter id; nil when there is
// none.
func storedKey(q querier, consumer, id string) (*storekit.DeadLetterKey, error) {
	k, err := scanKey(consumer, q.QueryRowContext(noInterrupt, `SELECT `+keyColumns+` FROM cairn_dead_letters WHERE consumer = ? AND id = ?`,
		consumer, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: consumer %q looking up dead letter %q: %w", consumer, id, err)
	}
	return &k, nil
}

// scanKey reads the keyColumns of a row, checking what decodeLetter
// checks of them.
func scanKey(consumer string, row interface{ Scan(dest ...any) error }) (storekit.DeadLetterKey, error) {
	var k storekit.DeadLetterKey
	var eventID []byte
	var part, major, minor, generation int64
	if err := row.Scan(&k.ID, &k.Stream, &eventID, &part, &major, &minor, &generation); err != nil {
		return k, err
	}
	id, err := uuid.FromBytes(eventID)
	if err != nil || part < 0 || part > math.MaxInt32 || generation <= 0 {
		return k, fmt.Errorf("%w: dead letter %q of consumer %q has event ID %x, part %d, generation %d",
			eventstore.ErrCorrupt, k.ID, consumer, eventID, part, generation)
	}
	k.EventID, k.Part, k.Generation = id, int(part), uint64(generation)
	k.Position = eventstore.Position{Major: uint64(major), Minor: uint64(minor)}
	return k, nil
}

// DeadLetterKeys implements [storekit.DeadLetterStore.DeadLetterKeys]
// with one query on the index by (consumer, position), which reads no
// payload. It reads them all before it yields the first, as DeadLetters
// does.
func (s *Store) DeadLetterKeys(ctx context.Context, consumer string, after, through eventstore.Position) iter.Seq2[storekit.DeadLetterKey, error] {
	return storekit.ListSeq(func() ([]storekit.DeadLetterKey, error) { return s.letterKeys(ctx, consumer, after, through) })
}

func (s *Store) letterKeys(ctx context.Context, consumer string, after, through eventstore.Position) ([]storekit.DeadLetterKey, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return nil, err
	}
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	lo, hi, ok := storekit.DeadLetterKeyRange(after, through)
	if !ok {
		return nil, nil
	}
	what := "list the dead letters of consumer " + quote(consumer) + " by position"
	rows, err := s.readers.QueryContext(noInterrupt, `SELECT `+keyColumns+` FROM cairn_dead_letters
		WHERE consumer = ? AND position >= ? AND position <= ?`, consumer, lo, hi)
	if err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	defer rows.Close()
	var keys []storekit.DeadLetterKey
	for rows.Next() {
		k, err := scanKey(consumer, rows)
		if err != nil {
			return nil, s.readErr(ctx, err, what)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	return storekit.SortDeadLetterKeys(keys, after, through), nil
}

// unixNanos stores a time as Unix nanoseconds, the zero time as 0 (its
// UnixNano is out of range). storekit.CheckDeadLetter refuses the other
// times that UnixNano cannot hold (before 1678, after 2262).
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// DeadLetters implements [storekit.DeadLetterStore.DeadLetters], oldest
// first. It reads them all before it yields the first, so that a caller
// that retries or deletes each one inside the loop holds no connection.
func (s *Store) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return storekit.ListSeq(func() ([]eventstore.DeadLetter, error) { return s.letters(ctx, consumer, "", false) })
}

// DeadLetter implements [storekit.DeadLetterStore.DeadLetter].
func (s *Store) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return eventstore.DeadLetter{}, err
	}
	letters, err := s.letters(ctx, consumer, id, true)
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	if len(letters) == 0 {
		return eventstore.DeadLetter{}, &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return letters[0], nil
}

// letters reads the dead letters of consumer, or the one with id when one
// is set.
func (s *Store) letters(ctx context.Context, consumer, id string, one bool) ([]eventstore.DeadLetter, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return nil, err
	}
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	query, args := `SELECT `+letterColumns+` FROM cairn_dead_letters WHERE consumer = ? ORDER BY id`, []any{consumer}
	if one {
		query, args = `SELECT `+letterColumns+` FROM cairn_dead_letters WHERE consumer = ? AND id = ?`, []any{consumer, id}
	}
	what := "list the dead letters of consumer " + quote(consumer)
	rows, err := s.readers.QueryContext(noInterrupt, query, args...)
	if err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	defer rows.Close()
	var out []eventstore.DeadLetter
	var cols [10 + 12]any
	var dest [len(cols)]any
	for i := range cols {
		dest[i] = &cols[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest[:]...); err != nil {
			return nil, s.readErr(ctx, err, what)
		}
		d, err := decodeLetter(&cols)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(ctx, err, what)
	}
	return out, nil
}

// decodeLetter checks every column, as decodeEvent does for the event.
func decodeLetter(c *[22]any) (eventstore.DeadLetter, error) {
	var d eventstore.DeadLetter
	var ok bool
	d.ID, _ = c[0].(string)
	d.Consumer, _ = c[1].(string)
	bad := func(reason string) error {
		return fmt.Errorf("%w: dead letter %q of consumer %q: %s", eventstore.ErrCorrupt, d.ID, d.Consumer, reason)
	}
	part, ok1 := c[2].(int64)
	d.Error, ok = c[3].(string)
	attempts, ok2 := c[4].(int64)
	first, ok3 := c[5].(int64)
	last, ok4 := c[6].(int64)
	generation, ok5 := c[7].(int64)
	claimed, ok6 := c[8].(int64)
	minor, ok7 := c[9].(int64)
	if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || part < 0 || part > math.MaxInt32 || attempts < 0 || attempts > math.MaxInt32 || generation <= 0 {
		return d, bad(fmt.Sprintf("part %v, error %T, attempts %v, failures %v and %v, generation %v, claimed until %v",
			c[2], c[3], c[4], c[5], c[6], c[7], c[8]))
	}
	d.Part, d.Attempts, d.Generation = int(part), int(attempts), uint64(generation)
	d.FirstFailure, d.LastFailure, d.ClaimedUntil = fromUnixNanos(first), fromUnixNanos(last), fromUnixNanos(claimed)
	e, err := decodeEvent(valuesRow(c[10:]))
	if err != nil {
		return d, bad(err.Error())
	}
	e.Position.Minor = uint64(minor)
	d.Event = e
	return d, nil
}

// CountDeadLetters implements [storekit.DeadLetterStore.CountDeadLetters].
func (s *Store) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return 0, err
	}
	if err := s.readable(ctx); err != nil {
		return 0, err
	}
	var n int
	err := s.readers.QueryRowContext(noInterrupt, `SELECT count(*) FROM cairn_dead_letters WHERE consumer = ?`, consumer).Scan(&n)
	if err != nil {
		return 0, s.readErr(ctx, err, "count the dead letters of consumer "+quote(consumer))
	}
	return n, nil
}

// DeleteDeadLetter implements [storekit.DeadLetterStore.DeleteDeadLetter].
func (s *Store) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	return s.write(ctx, func(tx *writeTx) error { return deleteDeadLetter(tx.conn, consumer, id) })
}

func deleteDeadLetter(q execer, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	res, err := q.ExecContext(noInterrupt, `DELETE FROM cairn_dead_letters WHERE consumer = ? AND id = ?`, consumer, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete dead letter %q of consumer %q: %w", id, consumer, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return fmt.Errorf("sqlite: delete dead letter %q of consumer %q: %w", id, consumer, err)
		}
		return &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return nil
}
