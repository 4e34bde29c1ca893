package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Append implements [eventstore.Store.Append]. The append joins the writer's
// next transaction. If ctx ends while it waits to be taken, nothing is
// written and Append returns ctx.Err(); once taken, it completes and reports
// the outcome.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	// Only IDs the caller chose can repeat stored ones: the store's own are
	// new UUIDv7s. Knowing this spares a lookup per event.
	callerIDs := false
	for i := range events {
		if events[i].ID != (uuid.UUID{}) {
			callerIDs = true
			break
		}
	}
	prepared, err := eventstore.PrepareAppend(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	// Encoding here, not in the writer, keeps the single writer busy only
	// with SQLite.
	extras := make([]any, len(prepared))
	for i := range prepared {
		if extras[i], err = encodeExtra(prepared[i].Metadata.Extra); err != nil {
			return eventstore.AppendResult{}, &eventstore.InvalidArgumentError{
				Stream: stream, Index: i, Field: "metadata", Reason: err.Error()}
		}
	}
	j := &appendJob{
		stream:    stream,
		expected:  expected,
		events:    prepared,
		extras:    extras,
		callerIDs: callerIDs,
		done:      make(chan struct{}),
	}
	if err := s.w.enqueue(j); err != nil {
		return eventstore.AppendResult{}, err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		var abandoned bool
		s.w.locked(func() {
			if !j.claimed {
				j.abandoned = true
				abandoned = true
			}
		})
		if abandoned {
			return eventstore.AppendResult{}, ctx.Err()
		}
		<-j.done
	}
	return j.result, j.err
}

// appendJob is one Append waiting for, or running in, the writer.
type appendJob struct {
	stream    string
	expected  eventstore.ExpectedVersion
	events    []eventstore.EventData
	extras    []any // Metadata.Extra of each event, encoded
	callerIDs bool

	// claimed and abandoned are guarded by the writer's lock.
	claimed, abandoned bool

	result eventstore.AppendResult
	err    error
	done   chan struct{}
}

func (j *appendJob) claim() bool {
	if j.abandoned {
		return false
	}
	j.claimed = true
	return true
}

func (j *appendJob) finish(err error) {
	if err != nil {
		j.result = eventstore.AppendResult{}
	}
	j.err = err
	close(j.done)
}

// run checks the stream's state and writes the events. Earlier jobs of the
// same transaction are visible to it, so two appends to one stream in one
// group are checked one after the other, as if committed apart.
func (j *appendJob) run(tx *writeTx) error {
	ctx := context.Background()
	var last int64
	err := tx.lastVersion.QueryRowContext(ctx, j.stream).Scan(&last)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: append to stream %q: read its version: %w", j.stream, err)
	}
	if last < 0 {
		return &CorruptError{Stream: j.stream, Version: uint64(last), Field: "version", Reason: "is negative"}
	}
	next := uint64(last) + 1
	if !exists {
		next = 0
	}
	current := eventstore.StreamState(next-1, exists)

	if exists && j.callerIDs {
		repeat, err := j.findStored(tx, current)
		if err != nil {
			return err
		}
		first, found, err := eventstore.CheckRepeat(j.stream, j.expected, j.events, repeat)
		if err != nil {
			return err
		}
		if found {
			lastVersion := first + uint64(len(j.events)) - 1
			var pos int64
			if err := tx.positionAt.QueryRowContext(ctx, j.stream, int64(lastVersion)).Scan(&pos); err != nil {
				return fmt.Errorf("sqlite: append to stream %q: read the position of version %d: %w", j.stream, lastVersion, err)
			}
			j.result = eventstore.AppendResult{
				FirstVersion: first,
				LastVersion:  lastVersion,
				Position:     eventstore.Position{Major: uint64(pos)},
				Duplicate:    true,
			}
			return nil
		}
	}
	if !j.expected.Matches(next-1, exists) {
		return &eventstore.WrongVersionError{Stream: j.stream, Expected: j.expected, Actual: current}
	}

	recordedAt := tx.now.UnixNano()
	var pos int64
	for i := range j.events {
		e := &j.events[i]
		res, err := tx.insert.ExecContext(ctx, j.stream, int64(next)+int64(i), e.ID[:], e.Type, int64(e.SchemaVersion), e.Data,
			nullable(e.Metadata.CorrelationID), nullable(e.Metadata.CausationID), nullable(e.Metadata.CommandID), j.extras[i], recordedAt)
		if err != nil {
			return fmt.Errorf("sqlite: append to stream %q: write event %d (version %d, type %q): %w",
				j.stream, i, next+uint64(i), e.Type, err)
		}
		if i == len(j.events)-1 {
			if pos, err = res.LastInsertId(); err != nil {
				return fmt.Errorf("sqlite: append to stream %q: read the position: %w", j.stream, err)
			}
		}
	}
	j.result = eventstore.AppendResult{
		FirstVersion: next,
		LastVersion:  next + uint64(len(j.events)) - 1,
		Position:     eventstore.Position{Major: uint64(pos)},
	}
	return nil
}

// findStored looks up which of the append's event IDs the stream holds.
func (j *appendJob) findStored(tx *writeTx, current eventstore.ExpectedVersion) (eventstore.Repeat, error) {
	repeat := eventstore.Repeat{Current: current}
	for _, e := range j.events {
		var v int64
		err := tx.findID.QueryRowContext(context.Background(), e.ID[:], j.stream).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return repeat, fmt.Errorf("sqlite: append to stream %q: look up event ID %s: %w", j.stream, e.ID, err)
		}
		if repeat.Stored == nil {
			repeat.Stored = make(map[uuid.UUID]uint64)
		}
		repeat.Stored[e.ID] = uint64(v)
	}
	return repeat, nil
}

// nullable stores an empty string as NULL, which keeps the command ID index
// to the events that have one.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func encodeExtra(extra map[string]string) (any, error) {
	if len(extra) == 0 {
		return nil, nil
	}
	// JSON would silently replace invalid UTF-8, and the event would not
	// read back as it was written.
	for k, v := range extra {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("entry %q is not valid UTF-8", k)
		}
	}
	b, err := json.Marshal(extra)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
