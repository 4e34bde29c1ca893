package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// maxRaces bounds how often an append retries after losing a race that its
// expected version allows it to retry (Any, StreamExists): another append
// took the version it was about to write.
const maxRaces = 100

// querier is what appends need from a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Append implements [eventstore.Store.Append] in one round trip, in a
// transaction of its own, or, for a single event, in one that it may share
// with other appends of this store made at the same time (group commit,
// group.go): its result is the same either way. Subscribers in this
// process are woken at once, those in other processes by a NOTIFY sent
// after the commit.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.AppendResult{}, err
	}
	events, err := storekit.PrepareAppend(ctx, stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	// Append's statement has no younger-writer check (AppendTx's has): it
	// is its transaction's only statement, and PostgreSQL takes that
	// statement's snapshot before it gives the transaction an ID, at its
	// first insert. Every event the statement sees was committed before
	// the snapshot by a transaction that had its ID by then, hence an older
	// one; an event it does not see takes the same version and the insert
	// collides with it on (stream, version), and the retry below is a new
	// transaction with a new, younger ID. So the events always sort after
	// the stream's earlier ones. TestStreamsStayInVersionOrderUnderMixedAppends
	// checks it.
	st := s.appendStatement(stream, expected, events, false)
	tried := false // the group wrote nothing: look why before trying again
	// An append that finds no other under way goes alone, at once: a group
	// forms only from appends that overlap (group.go).
	if len(events) == 1 && s.appending.Add(1) > 1 {
		defer s.appending.Add(-1)
		if err := ctx.Err(); err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("postgres: append to stream %q: %w", stream, err)
		}
		r, alone, err := s.groupAppendOne(ctx, st)
		if err != nil {
			return eventstore.AppendResult{}, s.closedOr(fmt.Errorf("postgres: append to stream %q: %w", stream, err))
		}
		if !alone {
			return r, nil
		}
		tried = true
	} else if len(events) == 1 {
		defer s.appending.Add(-1)
	}
	for range maxRaces {
		if !tried {
			r, written, err := s.tryAppend(ctx, s.pool, st)
			if err == nil && written {
				s.wake()
				return r, nil
			}
			if err != nil && !isUniqueViolation(err) {
				return eventstore.AppendResult{}, s.closedOr(fmt.Errorf("postgres: append to stream %q: %w", stream, err))
			}
		}
		tried = false
		r, retry, err := s.explain(ctx, s.pool, stream, expected, events)
		if err != nil || !retry {
			return r, err
		}
	}
	return eventstore.AppendResult{}, fmt.Errorf("postgres: append to stream %q: lost the race for the next version %d times in a row", stream, maxRaces)
}

// AppendTx appends events like [Store.Append], inside the caller's
// transaction: they commit or roll back with it, together with whatever
// else it writes (a read model, an outbox).
//
// Their positions are those of tx, so subscribers see them, in order, once
// tx commits and every transaction older than it has ended. Nobody is
// notified: subscribers in this process and others find the events at their
// next poll, unless the caller calls [Store.Notify] after the commit.
//
// The append runs in a savepoint, sent in the same round trip, so that a
// version conflict leaves tx usable. Under READ COMMITTED an append with
// [eventstore.Any] that races another retries; under REPEATABLE READ or
// SERIALIZABLE it cannot see the other's events and fails.
//
// tx takes its ID, hence its events' positions, when it first writes. When
// a younger transaction has appended to stream since, and committed, the
// new events would sort before that one's, out of version order: AppendTx
// then fails with a [*TxTooOldError] (errors.Is [ErrTxTooOld]) and writes
// nothing. No retry within tx can succeed; roll tx back and run the whole
// transaction again. An AppendTx that is tx's first write fails so only
// when it races another append to the stream: its first attempt took the
// ID, and a younger transaction won the version it was after.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.AppendResult{}, err
	}
	events, err := storekit.PrepareAppend(ctx, stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	st := s.appendStatement(stream, expected, events, true)
	for range maxRaces {
		r, written, err := s.trySavepointAppend(ctx, tx, st)
		if err == nil && written {
			return r, nil
		}
		if err != nil && !isUniqueViolation(err) {
			return eventstore.AppendResult{}, s.closedOr(fmt.Errorf("postgres: append to stream %q in a transaction: %w", stream, err))
		}
		r, retry, err := s.explain(ctx, tx, stream, expected, events)
		if err != nil || !retry {
			return r, err
		}
	}
	return eventstore.AppendResult{}, fmt.Errorf("postgres: append to stream %q in a transaction: lost the race for the next version %d times in a row", stream, maxRaces)
}

// Notify wakes the store's subscribers, in this process and others (through
// a coalesced NOTIFY outside any append's transaction). Call it after
// committing a transaction that used [Store.AppendTx], so that subscribers
// need not wait for their next poll.
func (s *Store) Notify() { s.wake() }

// appendStatement is the append statement and its parameters: the stream,
// the expected version and the events. Many events go as parallel arrays,
// so that any number is one statement; a single event goes as plain values,
// which spares both ends the array encoding and the server the unnest, the
// commonest append's largest costs besides the write itself.
type appendStatement struct {
	sql  string
	args []any // sql's parameters
	// all is every parameter (appendCheck), as the statements that check
	// the last version take them: a group's (group.go).
	all []any
}

// inTx chooses AppendTx's statements, which check the stream's last
// writer (see [ErrTxTooOld]).
func (s *Store) appendStatement(stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData, inTx bool) appendStatement {
	kind, version := kindAny, int64(0)
	switch {
	case expected.IsNoStream():
		kind = kindNoStream
	case expected.IsStreamExists():
		kind = kindStreamExists
	default:
		if v, ok := expected.Version(); ok {
			kind, version = kindExact, int64(v)
			if v > math.MaxInt64 {
				// No stream reaches this version; -1 matches no stream
				// either, without overflowing the statement's bigint.
				version = -1
			}
		}
	}
	check := checkLast
	switch {
	case inTx || len(events) > 1: // see appendCheck
	case kind == kindExact:
		check = checkExact
	case kind == kindNoStream:
		check = checkNew
	}
	many, one := s.sql.append, s.sql.appendOne[check]
	if inTx {
		many, one = s.sql.appendTx, s.sql.appendOneTx
	}
	// An append of the command bus stays out of the command index (see
	// schema step 6).
	derived := storekit.CommandIDsDerived(stream, events)
	if len(events) == 1 {
		e := events[0]
		all := []any{stream, pgUUID(e.ID), e.Type, int64(e.SchemaVersion), e.Data, e.Metadata.CorrelationID,
			e.Metadata.CausationID, e.Metadata.CommandID, extraJSON(e.Metadata.Extra), derived, version, kind}
		return appendStatement{sql: one, args: all[:appendParams[check]], all: all}
	}
	n := len(events)
	ids := make([]pgtype.UUID, n)
	types := make([]string, n)
	schemas := make([]int64, n)
	data := make([][]byte, n)
	corr := make([]string, n)
	caus := make([]string, n)
	cmd := make([]string, n)
	extra := make([]string, n)
	for i, e := range events {
		ids[i] = pgUUID(e.ID)
		types[i] = e.Type
		schemas[i] = int64(e.SchemaVersion)
		data[i] = e.Data
		corr[i] = e.Metadata.CorrelationID
		caus[i] = e.Metadata.CausationID
		cmd[i] = e.Metadata.CommandID
		extra[i] = extraJSON(e.Metadata.Extra)
	}
	all := []any{stream, ids, types, schemas, data, corr, caus, cmd, extra, derived, version, kind}
	return appendStatement{sql: many, args: all, all: all} // many events check the last version
}

// pgUUID is an event ID as pgx encodes it best: binary when the statement
// is prepared, text when the connection runs in exec or simple-protocol
// mode. uuid.UUID itself goes through its driver.Valuer, a string per ID.
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// extraJSON is the metadata's free key/values as the statement takes them:
// JSON text, or "" for none.
func extraJSON(extra map[string]string) string {
	if len(extra) == 0 {
		return ""
	}
	return string(storekit.ExtraJSON(extra))
}

// appendOutcome is what the append statement returns: a row per event it
// wrote, with the event's position and version.
type appendOutcome struct {
	count, first, seq int64
	txID              uint64
}

// read reads and closes the rows of the append statement, which share a
// transaction ID. The position is the last event's: that of the row with
// the highest version.
func (o *appendOutcome) read(rows pgx.Rows) error {
	var txID uint64
	var seq, version, last int64
	_, err := pgx.ForEachRow(rows, []any{&txID, &seq, &version}, func() error {
		if o.count == 0 || version < o.first {
			o.first = version
		}
		if o.count == 0 || version > last {
			last, o.txID, o.seq = version, txID, seq
		}
		o.count++
		return nil
	})
	return err
}

// result is the append's result, and false when it wrote nothing (the
// expected version did not match).
func (o *appendOutcome) result() (eventstore.AppendResult, bool) {
	if o.count == 0 {
		return eventstore.AppendResult{}, false
	}
	return eventstore.AppendResult{
		FirstVersion: uint64(o.first),
		LastVersion:  uint64(o.first + o.count - 1),
		Position:     eventstore.Position{Major: o.txID, Minor: uint64(o.seq)},
	}, true
}

// tryAppend runs the append statement. written is false when the expected
// version did not match, err a unique violation when another append took
// the versions or the IDs first.
func (s *Store) tryAppend(ctx context.Context, q querier, st appendStatement) (r eventstore.AppendResult, written bool, err error) {
	var o appendOutcome
	rows, err := q.Query(ctx, st.sql, st.args...)
	if err != nil {
		return r, false, err
	}
	if err := o.read(rows); err != nil {
		return r, false, err
	}
	r, written = o.result()
	return r, written, nil
}

// trySavepointAppend is tryAppend inside a savepoint of tx, all in one round
// trip, rolling back to the savepoint when the append fails.
func (s *Store) trySavepointAppend(ctx context.Context, tx pgx.Tx, st appendStatement) (r eventstore.AppendResult, written bool, err error) {
	var o appendOutcome
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT cairn_append")
	b.Queue(st.sql, st.args...).Query(o.read)
	b.Queue("RELEASE SAVEPOINT cairn_append")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT cairn_append"); rerr != nil {
			return r, false, errors.Join(err, rerr)
		}
		return r, false, err
	}
	r, written = o.result()
	return r, written, nil
}

// explain finds out why an append wrote nothing: it is a repeat of an earlier
// append (success, Duplicate set), a version mismatch or an ID conflict (an
// error), an append behind a younger transaction (an error), or it lost a
// race that its expected version lets it retry.
func (s *Store) explain(ctx context.Context, q querier, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (r eventstore.AppendResult, retry bool, err error) {
	ids := make([]pgtype.UUID, len(events))
	for i, e := range events {
		ids[i] = pgUUID(e.ID)
	}
	b := &pgx.Batch{}
	var last *int64
	var lastTx, ownTx *uint64
	b.Queue(s.sql.current, stream).QueryRow(func(row pgx.Row) error { return row.Scan(&last, &lastTx, &ownTx) })
	type place struct {
		version int64
		pos     eventstore.Position
	}
	stored := make(map[uuid.UUID]place)
	b.Queue(s.sql.stored, stream, ids).Query(func(rows pgx.Rows) error {
		var id pgtype.UUID
		var p place
		var seq int64
		_, err := pgx.ForEachRow(rows, []any{&id, &p.version, &p.pos.Major, &seq}, func() error {
			p.pos.Minor = uint64(seq)
			stored[id.Bytes] = p
			return nil
		})
		return err
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return r, false, s.closedOr(fmt.Errorf("postgres: append to stream %q: reading the stream's state: %w", stream, err))
	}
	current := eventstore.NoStream
	if last != nil {
		current = eventstore.Exact(uint64(*last))
	}
	repeat := storekit.Repeat{Stored: make(map[uuid.UUID]uint64, len(stored)), Current: current}
	for id, p := range stored {
		repeat.Stored[id] = uint64(p.version)
	}
	first, found, err := storekit.CheckRepeat(stream, expected, events, repeat)
	if err != nil {
		return r, false, err
	}
	if found {
		return eventstore.AppendResult{
			FirstVersion: first,
			LastVersion:  first + uint64(len(events)) - 1,
			Position:     stored[events[len(events)-1].ID].pos,
			Duplicate:    true,
		}, false, nil
	}
	lastV := uint64(0)
	if last != nil {
		lastV = uint64(*last)
	}
	if !expected.Matches(lastV, last != nil) {
		return r, false, &eventstore.WrongVersionError{Stream: stream, Expected: expected, Actual: current}
	}
	// Only a transaction that has written has an ID (ownTx): an AppendTx's
	// transaction. Once a younger one wrote the stream's last event, this
	// one can never append to it, so retrying here would only spin.
	if ownTx != nil && lastTx != nil && *lastTx > *ownTx {
		return r, false, &TxTooOldError{Stream: stream, Version: lastV, TxID: *ownTx, LastTxID: *lastTx}
	}
	// The stream is now as expected: a concurrent append moved it between
	// our statement and this look (Any, StreamExists), or one that had
	// taken our IDs rolled back.
	return r, true, nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
