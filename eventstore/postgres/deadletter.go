package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

var _ storekit.DeadLetterStore = (*Store)(nil)

// letterColumns are the columns that scanLetter reads, in its order.
const letterColumns = `id, consumer, part, event_id, stream, version, major, minor, type, schema_version, data,
	correlation_id, causation_id, command_id, extra, recorded_at, error, attempts, first_failure, last_failure, generation,
	claimed_until`

// keyColumns are the columns that scanKey reads, in its order.
const keyColumns = `id, stream, event_id, part, major, minor, generation`

// ParkDeadLetter implements [storekit.DeadLetterStore.ParkDeadLetter] with
// one upsert on (consumer, stream, event_id, part): parking the same part
// again updates the error, attempts and last failure, adds a generation,
// and returns the ID and first failure that were stored first. With
// d.Generation set it is one conditional update instead.
func (s *Store) ParkDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.DeadLetter{}, err
	}
	parked, err := s.parkDeadLetter(ctx, s.pool, d)
	return parked, s.closedOr(err)
}

// ParkDeadLetterTx implements [storekit.TxCheckpointStore.ParkDeadLetterTx]:
// the upsert of [Store.ParkDeadLetter] in tx.
func (s *Store) ParkDeadLetterTx(ctx context.Context, tx pgx.Tx, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if tx == nil {
		return eventstore.DeadLetter{}, errNilTx
	}
	parked, err := s.parkDeadLetter(ctx, tx, d)
	return parked, s.closedOr(err)
}

func (s *Store) parkDeadLetter(ctx context.Context, q querier, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetter(d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := ctx.Err(); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if d.Generation != 0 {
		return s.reparkDeadLetter(ctx, q, d)
	}
	e := d.Event
	// JSON goes as text: bytes would be sent as bytea when the pool does
	// not prepare statements.
	var extra *string
	if len(e.Metadata.Extra) > 0 {
		b, err := json.Marshal(e.Metadata.Extra)
		if err != nil {
			return eventstore.DeadLetter{}, err
		}
		text := string(b)
		extra = &text
	}
	if d.ID == "" {
		d.ID = ulid.Make().String()
	} else if err := s.letterIDFree(ctx, q, d); err != nil {
		return eventstore.DeadLetter{}, err
	}
	data := e.Data
	if data == nil {
		data = []byte{}
	}
	var generation int64
	err := q.QueryRow(ctx, s.fill(`INSERT INTO {{s}}.dead_letters AS l (consumer, event_id, part, id,
			stream, version, major, minor, type, schema_version, data, correlation_id, causation_id, command_id,
			extra, recorded_at, error, attempts, first_failure, last_failure, claimed_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16, $17, $18, $19, $20, $21)
		ON CONFLICT ON CONSTRAINT dead_letters_stream_event DO UPDATE SET
			error = excluded.error, attempts = excluded.attempts, last_failure = excluded.last_failure,
			claimed_until = excluded.claimed_until, generation = l.generation + 1
		RETURNING id, first_failure, generation`),
		d.Consumer, pgUUID(e.ID), d.Part, d.ID,
		e.StreamID, int64(e.Version), int64(e.Position.Major), int64(e.Position.Minor), e.Type, int64(e.SchemaVersion), data,
		e.Metadata.CorrelationID, e.Metadata.CausationID, e.Metadata.CommandID,
		extra, e.RecordedAt, d.Error, d.Attempts, d.FirstFailure, d.LastFailure, claimedUntil(d),
	).Scan(&d.ID, &d.FirstFailure, &generation)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "dead_letters_id" {
		// Another transaction took the ID since letterIDFree looked.
		if idErr := s.letterIDFree(ctx, q, d); idErr != nil {
			return eventstore.DeadLetter{}, idErr
		}
	}
	if err != nil {
		return eventstore.DeadLetter{}, parkErr(d, err)
	}
	return parked(d, generation), nil
}

// reparkDeadLetter is the compare-and-set of a park with d.Generation set:
// one update of the dead letter d.ID at that generation, or, when it
// matches nothing, the reason read right after. A concurrent change that
// made the update match nothing has committed by then (the update waited
// for it), and generations only grow, so the reason is the change.
func (s *Store) reparkDeadLetter(ctx context.Context, q querier, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	e := d.Event
	var generation int64
	err := q.QueryRow(ctx, s.fill(`UPDATE {{s}}.dead_letters SET
			error = $1, attempts = $2, last_failure = $3, claimed_until = $10, generation = generation + 1
		WHERE consumer = $4 AND id = $5 AND generation = $6 AND stream = $7 AND event_id = $8 AND part = $9
		RETURNING first_failure, generation`),
		d.Error, d.Attempts, d.LastFailure, d.Consumer, d.ID, int64(d.Generation), e.StreamID, pgUUID(e.ID), d.Part,
		claimedUntil(d),
	).Scan(&d.FirstFailure, &generation)
	if errors.Is(err, pgx.ErrNoRows) {
		stored, err := s.storedKey(ctx, q, d.Consumer, d.ID)
		if err == nil {
			if err = storekit.CheckDeadLetterGeneration(d, stored); err == nil {
				// Changed and changed back cannot be: report the change.
				err = &storekit.DeadLetterChangedError{Consumer: d.Consumer, ID: d.ID, Stream: e.StreamID,
					Version: e.Version, Part: d.Part, Generation: d.Generation, Actual: d.Generation}
			}
		}
		return eventstore.DeadLetter{}, err
	}
	if err != nil {
		return eventstore.DeadLetter{}, parkErr(d, err)
	}
	return parked(d, generation), nil
}

func parkErr(d eventstore.DeadLetter, err error) error {
	e := d.Event
	return fmt.Errorf("postgres: consumer %q parking event %s (stream %q, version %d, type %q): %w",
		d.Consumer, e.ID, e.StreamID, e.Version, e.Type, err)
}

// claimedUntil is d's claim as the column keeps it: NULL for none.
func claimedUntil(d eventstore.DeadLetter) *time.Time {
	if d.ClaimedUntil.IsZero() {
		return nil
	}
	return &d.ClaimedUntil
}

// parked is d as a park stored it, with the generation the store returned.
func parked(d eventstore.DeadLetter, generation int64) eventstore.DeadLetter {
	d.FirstFailure, d.Generation = d.FirstFailure.UTC(), uint64(generation)
	d.ClaimedUntil = d.ClaimedUntil.UTC()
	d.Event.EventData = d.Event.EventData.Clone()
	return d
}

// letterIDFree refuses d when its ID names another event's dead letter,
// before the unique key on (consumer, id) refuses the insert with a bare
// constraint error (which would also abort the caller's transaction).
func (s *Store) letterIDFree(ctx context.Context, q querier, d eventstore.DeadLetter) error {
	stored, err := s.storedKey(ctx, q, d.Consumer, d.ID)
	if err != nil || stored == nil {
		return err
	}
	return storekit.CheckDeadLetterID(d, stored.Stream, stored.EventID, stored.Part)
}

// storedKey reads the key of consumer's dead letter id; nil when there is
// none.
func (s *Store) storedKey(ctx context.Context, q querier, consumer, id string) (*storekit.DeadLetterKey, error) {
	k, err := scanKey(q.QueryRow(ctx, s.fill(`SELECT `+keyColumns+` FROM {{s}}.dead_letters WHERE consumer = $1 AND id = $2`), consumer, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: consumer %q looking up dead letter %q: %w", consumer, id, err)
	}
	return &k, nil
}

// scanKey reads the keyColumns of a row.
func scanKey(row pgx.Row) (storekit.DeadLetterKey, error) {
	var k storekit.DeadLetterKey
	var eventID pgtype.UUID
	var major, minor, generation int64
	if err := row.Scan(&k.ID, &k.Stream, &eventID, &k.Part, &major, &minor, &generation); err != nil {
		return k, err
	}
	if !eventID.Valid || generation <= 0 {
		return k, fmt.Errorf("%w: dead letter %q has event ID valid %t, generation %d", eventstore.ErrCorrupt, k.ID, eventID.Valid, generation)
	}
	k.EventID, k.Generation = eventID.Bytes, uint64(generation)
	k.Position = eventstore.Position{Major: uint64(major), Minor: uint64(minor)}
	return k, nil
}

// DeadLetterKeys implements [storekit.DeadLetterStore.DeadLetterKeys]
// with one query on the index by (consumer, major), which reads no
// payload. It reads them all before it yields the first, as DeadLetters
// does.
func (s *Store) DeadLetterKeys(ctx context.Context, consumer string, after, through eventstore.Position) iter.Seq2[storekit.DeadLetterKey, error] {
	return storekit.ListSeq(func() ([]storekit.DeadLetterKey, error) { return s.letterKeys(ctx, consumer, after, through) })
}

func (s *Store) letterKeys(ctx context.Context, consumer string, after, through eventstore.Position) ([]storekit.DeadLetterKey, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	lo, hi, ok := storekit.DeadLetterKeyRange(after, through)
	if !ok {
		return nil, nil
	}
	fail := func(err error) error {
		return s.closedOr(fmt.Errorf("postgres: listing the dead letters of consumer %q by position: %w", consumer, err))
	}
	rows, err := s.pool.Query(ctx, s.fill(`SELECT `+keyColumns+` FROM {{s}}.dead_letters
		WHERE consumer = $1 AND major >= $2 AND major <= $3`), consumer, lo, hi)
	if err != nil {
		return nil, fail(err)
	}
	defer rows.Close()
	var keys []storekit.DeadLetterKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fail(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(err)
	}
	return storekit.SortDeadLetterKeys(keys, after, through), nil
}

// DeadLetters implements [storekit.DeadLetterStore.DeadLetters], oldest
// first. It reads them all before it yields the first, so that a caller
// that retries each one inside the loop does not hold a connection.
func (s *Store) DeadLetters(ctx context.Context, consumer string) iter.Seq2[eventstore.DeadLetter, error] {
	return storekit.ListSeq(func() ([]eventstore.DeadLetter, error) { return s.deadLetters(ctx, consumer) })
}

func (s *Store) deadLetters(ctx context.Context, consumer string) ([]eventstore.DeadLetter, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.fill(`SELECT `+letterColumns+` FROM {{s}}.dead_letters WHERE consumer = $1 ORDER BY id`), consumer)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing the dead letters of consumer %q: %w", consumer, err))
	}
	defer rows.Close()
	var out []eventstore.DeadLetter
	for rows.Next() {
		d, err := scanLetter(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: listing the dead letters of consumer %q: %w", consumer, err))
	}
	return out, nil
}

// DeadLetter implements [storekit.DeadLetterStore.DeadLetter].
func (s *Store) DeadLetter(ctx context.Context, consumer, id string) (eventstore.DeadLetter, error) {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if err := s.checkOpen(); err != nil {
		return eventstore.DeadLetter{}, err
	}
	rows, err := s.pool.Query(ctx, s.fill(`SELECT `+letterColumns+` FROM {{s}}.dead_letters WHERE consumer = $1 AND id = $2`), consumer, id)
	if err != nil {
		return eventstore.DeadLetter{}, s.closedOr(fmt.Errorf("postgres: reading dead letter %q of consumer %q: %w", id, consumer, err))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return eventstore.DeadLetter{}, s.closedOr(fmt.Errorf("postgres: reading dead letter %q of consumer %q: %w", id, consumer, err))
		}
		return eventstore.DeadLetter{}, &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return scanLetter(rows)
}

// CountDeadLetters implements [storekit.DeadLetterStore.CountDeadLetters].
func (s *Store) CountDeadLetters(ctx context.Context, consumer string) (int, error) {
	if err := storekit.ValidateConsumerName(consumer); err != nil {
		return 0, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	var n int
	err := s.pool.QueryRow(ctx, s.fill(`SELECT count(*) FROM {{s}}.dead_letters WHERE consumer = $1`), consumer).Scan(&n)
	if err != nil {
		return 0, s.closedOr(fmt.Errorf("postgres: counting the dead letters of consumer %q: %w", consumer, err))
	}
	return n, nil
}

// DeleteDeadLetter implements [storekit.DeadLetterStore.DeleteDeadLetter].
func (s *Store) DeleteDeadLetter(ctx context.Context, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	return s.closedOr(s.deleteDeadLetter(ctx, s.pool, consumer, id))
}

func (s *Store) deleteDeadLetter(ctx context.Context, q querier, consumer, id string) error {
	if err := storekit.CheckDeadLetterLookup(consumer, id); err != nil {
		return err
	}
	tag, err := q.Exec(ctx, s.fill(`DELETE FROM {{s}}.dead_letters WHERE consumer = $1 AND id = $2`), consumer, id)
	if err != nil {
		return fmt.Errorf("postgres: deleting dead letter %q of consumer %q: %w", id, consumer, err)
	}
	if tag.RowsAffected() == 0 {
		return &storekit.DeadLetterNotFoundError{Consumer: consumer, ID: id}
	}
	return nil
}

// scanLetter reads one dead_letters row. Every slice and map is fresh, so
// the caller may change what it gets.
func scanLetter(rows pgx.Rows) (eventstore.DeadLetter, error) {
	var (
		d                                     eventstore.DeadLetter
		id                                    pgtype.UUID
		version, major, minor, schemaVer      int64
		extra                                 []byte
		recordedAt, firstFailure, lastFailure time.Time
	)
	e := &d.Event
	var generation int64
	var claimed *time.Time
	err := rows.Scan(&d.ID, &d.Consumer, &d.Part, &id, &e.StreamID, &version, &major, &minor, &e.Type, &schemaVer, &e.Data,
		&e.Metadata.CorrelationID, &e.Metadata.CausationID, &e.Metadata.CommandID, &extra, &recordedAt,
		&d.Error, &d.Attempts, &firstFailure, &lastFailure, &generation, &claimed)
	if err != nil {
		return eventstore.DeadLetter{}, fmt.Errorf("%w: a dead_letters row does not decode: %v", eventstore.ErrCorrupt, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: dead letter %q of consumer %q (stream %q, version %d, type %q): %s",
			eventstore.ErrCorrupt, d.ID, d.Consumer, e.StreamID, version, e.Type, what)
	}
	if version < 0 || schemaVer < 0 || schemaVer > math.MaxUint32 || !id.Valid || generation <= 0 {
		return eventstore.DeadLetter{}, bad(fmt.Sprintf("version %d, schema version %d, event ID valid %t, generation %d",
			version, schemaVer, id.Valid, generation))
	}
	d.Generation = uint64(generation)
	if len(extra) > 0 && string(extra) != "null" {
		if err := json.Unmarshal(extra, &e.Metadata.Extra); err != nil {
			return eventstore.DeadLetter{}, bad(fmt.Sprintf("metadata is not an object of strings: %v", err))
		}
	}
	e.ID = id.Bytes
	e.Version, e.SchemaVersion = uint64(version), uint32(schemaVer)
	e.Position = eventstore.Position{Major: uint64(major), Minor: uint64(minor)}
	e.RecordedAt = recordedAt.UTC()
	if e.Data == nil {
		e.Data = []byte{}
	}
	d.FirstFailure, d.LastFailure = firstFailure.UTC(), lastFailure.UTC()
	if claimed != nil {
		d.ClaimedUntil = claimed.UTC()
	}
	return d, nil
}
