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
)

var _ eventstore.DeadLetterStore = (*Store)(nil)

// letterColumns are the columns that scanLetter reads, in its order: the
// letter's own, the minor half of the event's position, then the event's
// in the order of decodeEvent.
const letterColumns = `id, consumer, part, error, attempts, first_failure, last_failure, minor,
	position, stream, version, event_id, type, schema_version, data, correlation_id, causation_id, command_id, extra, recorded_at`

// ParkDeadLetter implements [eventstore.DeadLetterStore.ParkDeadLetter] with
// one upsert on (consumer, stream, event_id, part): parking the same part
// again updates the error, attempts and last failure, and returns the ID
// and first failure that were stored first.
func (s *Store) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	var parked eventstore.DeadLetter
	err := eventstore.CheckDeadLetter(d)
	if err == nil {
		err = s.write(ctx, func(tx *writeTx) error {
			parked, err = parkDeadLetter(tx.conn, d)
			return err
		})
	}
	return parked, err
}

// ParkDeadLetterTx implements [eventstore.TxCheckpointStore.ParkDeadLetterTx]:
// the upsert of [Store.ParkDeadLetter] in tx, the transaction of a running
// [Store.InTx].
func (s *Store) ParkDeadLetterTx(ctx context.Context, tx *sql.Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := eventstore.CheckDeadLetter(d); err != nil {
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
// transaction.
func parkDeadLetter(q querier, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
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
	var first int64
	err = q.QueryRowContext(noInterrupt, `INSERT INTO cairn_dead_letters (consumer, event_id, part, id,
			position, minor, stream, version, type, schema_version, data, correlation_id, causation_id, command_id,
			extra, recorded_at, error, attempts, first_failure, last_failure)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (consumer, stream, event_id, part) DO UPDATE SET
			error = excluded.error, attempts = excluded.attempts, last_failure = excluded.last_failure
		RETURNING id, first_failure`,
		d.Consumer, e.ID[:], d.Part, d.ID,
		int64(e.Position.Major), int64(e.Position.Minor), e.StreamID, int64(e.Version), e.Type, int64(e.SchemaVersion), data,
		nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID),
		extra, unixNanos(e.RecordedAt), d.Error, d.Attempts, unixNanos(d.FirstFailure), unixNanos(d.LastFailure),
	).Scan(&id, &first)
	if err != nil {
		return eventstore.DeadLetter{}, fmt.Errorf("sqlite: consumer %q parking event %s (stream %q, version %d, type %q): %w",
			d.Consumer, e.ID, e.StreamID, e.Version, e.Type, err)
	}
	d.ID, d.FirstFailure = id, fromUnixNanos(first)
	d.LastFailure = d.LastFailure.UTC()
	d.Event.EventData = d.Event.EventData.Clone()
	return d, nil
}

// letterIDFree refuses d when its ID names another event's dead letter:
// the unique key on (consumer, id) would refuse the insert with a bare
// constraint error. It runs in the write transaction of the insert, so
// nothing comes in between.
func letterIDFree(q querier, d eventstore.DeadLetter) error {
	var stream string
	var eventID []byte
	var part int
	err := q.QueryRowContext(noInterrupt, `SELECT stream, event_id, part FROM cairn_dead_letters WHERE consumer = ? AND id = ?`,
		d.Consumer, d.ID).Scan(&stream, &eventID, &part)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: consumer %q looking up dead letter %q: %w", d.Consumer, d.ID, err)
	}
	id, err := uuid.FromBytes(eventID)
	if err != nil {
		return fmt.Errorf("%w: dead letter %q of consumer %q has event ID %x", eventstore.ErrCorrupt, d.ID, d.Consumer, eventID)
	}
	return eventstore.CheckDeadLetterID(d, stream, id, part)
}

// unixNanos stores a time as Unix nanoseconds, the zero time as 0 (its
// UnixNano is out of range). eventstore.CheckDeadLetter refuses the other
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

// DeadLetters implements [eventstore.DeadLetterStore.DeadLetters], oldest
// first. It reads them all before it yields the first, so that a caller
// that retries or deletes each one inside the loop holds no connection.
func (s *Store) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return func(yield func(eventstore.DeadLetter, error) bool) {
		letters, err := s.letters(ctx, consumer, "", false)
		if err != nil {
			yield(eventstore.DeadLetter{}, err)
			return
		}
		for _, d := range letters {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// DeadLetter implements [eventstore.DeadLetterStore.DeadLetter].
func (s *Store) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := eventstore.CheckDeadLetterLookup(consumer, id); err != nil {
		return eventstore.DeadLetter{}, err
	}
	letters, err := s.letters(ctx, consumer, id, true)
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	if len(letters) == 0 {
		return eventstore.DeadLetter{}, &eventstore.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return letters[0], nil
}

// letters reads the dead letters of consumer, or the one with id when one
// is set.
func (s *Store) letters(ctx context.Context, consumer, id string, one bool) ([]eventstore.DeadLetter, error) {
	if err := eventstore.ValidateConsumerName(consumer); err != nil {
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
	var cols [8 + 12]any
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
func decodeLetter(c *[20]any) (eventstore.DeadLetter, error) {
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
	minor, ok5 := c[7].(int64)
	if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || part < 0 || part > math.MaxInt32 || attempts < 0 || attempts > math.MaxInt32 {
		return d, bad(fmt.Sprintf("part %v, error %T, attempts %v, failures %v and %v", c[2], c[3], c[4], c[5], c[6]))
	}
	d.Part, d.Attempts = int(part), int(attempts)
	d.FirstFailure, d.LastFailure = fromUnixNanos(first), fromUnixNanos(last)
	e, err := decodeEvent(valuesRow(c[8:]))
	if err != nil {
		return d, bad(err.Error())
	}
	e.Position.Minor = uint64(minor)
	d.Event = e
	return d, nil
}

// CountDeadLetters implements [eventstore.DeadLetterStore.CountDeadLetters].
func (s *Store) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	if err := eventstore.ValidateConsumerName(consumer); err != nil {
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

// DeleteDeadLetter implements [eventstore.DeadLetterStore.DeleteDeadLetter].
func (s *Store) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	if err := eventstore.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	return s.write(ctx, func(tx *writeTx) error { return deleteDeadLetter(tx.conn, consumer, id) })
}

func deleteDeadLetter(q execer, consumer, id string) error {
	if err := eventstore.CheckDeadLetterLookup(consumer, id); err != nil {
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
		return &eventstore.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return nil
}
