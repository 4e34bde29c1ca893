package kurrentdb

import (
	"context"
	"fmt"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// The dead letters of a consumer are the stream "cairn:deadletters-<name>"
// of two kinds of records: a parked record is a whole dead letter as a
// park left it (so it sets that dead letter, whatever came before), and a
// deleted record removes one. Their fold is the consumer's dead letters.
//
// KurrentDB has no conditional write but the expected revision of an
// append, so every park and delete is an append at the revision up to
// which the store folded the stream: a write by another process in
// between makes KurrentDB refuse it, and the store folds the new records
// and decides again (a compare-and-set on the whole consumer, coarser
// than the SQL stores' per dead letter, which costs only a retry). The
// fold is kept per consumer with its revision, so that each call reads
// only the records appended since.
//
// The stream grows with every park and delete, so it is compacted: once it
// holds more superseded records than live dead letters (and at least
// compactAfter), the store appends, at the revisions that follow its fold,
// a compacted record (a marker, which carries no state and which the fold
// passes over) and then each live dead letter again, and only once all are
// written sets the stream's $tb (truncate before) to the marker's revision.
//
// Why a marker: $tb must point at a record that exists, whatever the
// number of live dead letters. Were it set to the first restated letter,
// a compaction with none left would set it past the stream's end; a fold
// from the start would then read no record and not learn the stream's
// revision (its writes, expecting no stream, would be refused for good),
// and a fold from before the compaction would find no record after $tb to
// show it the gap. With the marker, every fold reads at least it: a fold
// from the start begins at the marker with no dead letters, which the
// letters restated after it set again; a fold whose next revision was
// truncated reads the marker in its place, sees the gap and starts over.
//
// Why the fold passes over a marker instead of restarting at it: a fold
// that reads a marker without a gap has read every record before it, and
// the restated letters after it are whole parked records that set each
// dead letter to what it already is, so passing over the marker folds to
// the same state however much of the restatement was written. A reset
// there would drop the letters a compaction cut short had yet to restate.
// A fold begins at a marker (empty, then the restatement) only when $tb
// points at it, and $tb is set only after the whole restatement is
// written. The appends of a compaction are compare-and-sets like every
// write, so no other record comes between the marker and its letters; one
// that does stops the compaction, which leaves records that fold to what
// they did, as does a compaction cut short by a failure.
//
// A compaction costs a dead letter's record for every superseded record
// since the last, plus the marker (which rides in the first append) and
// the write of $tb: an amortized append per write at most.
const (
	parkedRecord  = "cairn.deadletter.parked"
	deletedRecord = "cairn.deadletter.deleted"
	// compactedRecord is the marker a compaction begins with (see
	// above).
	compactedRecord = "cairn.deadletter.compacted"
	// letterPage is how many records a read of a dead-letter stream asks
	// for at once: records carry whole events, up to a MiB each.
	letterPage = 128
	// compactRecords and compactBytes bound one append of a compaction.
	compactRecords = 64
	compactBytes   = 512 << 10
)

// letterFields is a parked record: the dead letter but for its event's
// data, which is the record's payload.
type letterFields struct {
	ID           string      `json:"id"`
	Consumer     string      `json:"consumer"`
	Generation   uint64      `json:"generation"`
	Part         int         `json:"part"`
	Error        string      `json:"error"`
	Attempts     int         `json:"attempts"`
	FirstFailure time.Time   `json:"first_failure,omitzero"`
	LastFailure  time.Time   `json:"last_failure,omitzero"`
	ClaimedUntil time.Time   `json:"claimed_until,omitzero"`
	Event        letterEvent `json:"event"`
}

// letterEvent is the event of a parked record, but for its data.
type letterEvent struct {
	Stream        string              `json:"stream"`
	Version       uint64              `json:"version"`
	Position      eventstore.Position `json:"position"`
	ID            uuid.UUID           `json:"id"`
	Type          string              `json:"type"`
	SchemaVersion uint32              `json:"schema_version"`
	Metadata      eventstore.Metadata `json:"metadata"`
	RecordedAt    time.Time           `json:"recorded_at,omitzero"`
}

// deletedFields is a deleted record.
type deletedFields struct {
	ID       string `json:"id"`
	Consumer string `json:"consumer"`
}

// compactedFields is a compacted record: it says only whose stream it is
// in; the restated letters follow it.
type compactedFields struct {
	Consumer string `json:"consumer"`
}

// letterKey is what makes a dead letter unique within its consumer.
type letterKey struct {
	stream  string
	eventID uuid.UUID
	part    int
}

func keyOf(d *eventstore.DeadLetter) letterKey {
	return letterKey{stream: d.Event.StreamID, eventID: d.Event.ID, part: d.Part}
}

// letterFold is the fold of one consumer's dead-letter stream.
type letterFold struct {
	consumer, stream string
	// lock is held by the call that reads or writes the fold, so that the
	// calls of one process take turns instead of racing on the server; a
	// channel, so that waiting for it ends with the caller's context.
	lock chan struct{}

	// folded is whether the fold has read a record; next is then the
	// revision after the last it read, and since the revision from which
	// it counts records towards the next compaction.
	folded      bool
	next, since uint64
	byID        map[string]eventstore.DeadLetter
	byKey       map[letterKey]string
}

func newLetterFold(consumer string) *letterFold {
	f := &letterFold{consumer: consumer, stream: stateStream(deadLetterKind, consumer), lock: make(chan struct{}, 1)}
	f.reset()
	return f
}

// reset empties the fold, to read its stream from the start.
func (f *letterFold) reset() {
	f.folded, f.next, f.since = false, 0, 0
	f.byID = make(map[string]eventstore.DeadLetter)
	f.byKey = make(map[letterKey]string)
}

// expected is the expected revision of a write after what the fold read.
func (f *letterFold) expected() esdb.ExpectedRevision {
	if !f.folded {
		return esdb.NoStream{}
	}
	return esdb.Revision(f.next - 1)
}

// set makes d a dead letter of the fold, in place of the one with its ID
// or its key.
func (f *letterFold) set(d eventstore.DeadLetter) {
	if old, ok := f.byID[d.ID]; ok {
		delete(f.byKey, keyOf(&old))
	}
	k := keyOf(&d)
	if id, ok := f.byKey[k]; ok {
		delete(f.byID, id)
	}
	f.byID[d.ID], f.byKey[k] = d, d.ID
}

// remove drops the dead letter id from the fold.
func (f *letterFold) remove(id string) {
	if old, ok := f.byID[id]; ok {
		delete(f.byKey, keyOf(&old))
		delete(f.byID, id)
	}
}

// apply folds the record r.
func (f *letterFold) apply(r *esdb.RecordedEvent) error {
	switch r.EventType {
	case parkedRecord:
		var fields letterFields
		if err := decodeRecord(f.stream, r, parkedRecord, &fields); err != nil {
			return err
		}
		d := fields.letter(r.Data)
		if d.Consumer != f.consumer {
			return corruptRecord(f.stream, r, fmt.Sprintf("is a dead letter of consumer %q", d.Consumer))
		}
		if err := storekit.CheckDeadLetter(d); err != nil || d.ID == "" || d.Generation == 0 {
			return corruptRecord(f.stream, r, fmt.Sprintf("is not a dead letter any store keeps (ID %q, generation %d): %v", d.ID, d.Generation, err))
		}
		f.set(d)
	case deletedRecord:
		var fields deletedFields
		if err := decodeRecord(f.stream, r, deletedRecord, &fields); err != nil {
			return err
		}
		if fields.Consumer != f.consumer {
			return corruptRecord(f.stream, r, fmt.Sprintf("deletes a dead letter of consumer %q", fields.Consumer))
		}
		f.remove(fields.ID)
	case compactedRecord:
		// Nothing to fold: see the doc of the dead-letter streams above.
		var fields compactedFields
		if err := decodeRecord(f.stream, r, compactedRecord, &fields); err != nil {
			return err
		}
		if fields.Consumer != f.consumer {
			return corruptRecord(f.stream, r, fmt.Sprintf("is a compaction of consumer %q", fields.Consumer))
		}
	default:
		return corruptRecord(f.stream, r, fmt.Sprintf("is a %q, which a dead-letter stream does not hold", r.EventType))
	}
	return nil
}

// letter is the dead letter of a parked record whose payload is data.
func (l *letterFields) letter(data []byte) eventstore.DeadLetter {
	if data == nil {
		data = []byte{}
	}
	e := l.Event
	return eventstore.DeadLetter{ID: l.ID, Consumer: l.Consumer, Part: l.Part, Error: l.Error, Attempts: l.Attempts,
		FirstFailure: l.FirstFailure, LastFailure: l.LastFailure, Generation: l.Generation, ClaimedUntil: l.ClaimedUntil,
		Event: eventstore.Event{
			EventData: eventstore.EventData{ID: e.ID, Type: e.Type, SchemaVersion: e.SchemaVersion, Data: data, Metadata: e.Metadata},
			StreamID:  e.Stream, Version: e.Version, Position: e.Position, RecordedAt: e.RecordedAt,
		}}
}

// parkedOf is the parked record of d.
func parkedOf(d *eventstore.DeadLetter) record {
	e := &d.Event
	return record{typ: parkedRecord, payload: e.Data, fields: letterFields{
		ID: d.ID, Consumer: d.Consumer, Generation: d.Generation, Part: d.Part, Error: d.Error, Attempts: d.Attempts,
		FirstFailure: d.FirstFailure, LastFailure: d.LastFailure, ClaimedUntil: d.ClaimedUntil,
		Event: letterEvent{Stream: e.StreamID, Version: e.Version, Position: e.Position, ID: e.ID, Type: e.Type,
			SchemaVersion: e.SchemaVersion, Metadata: e.Metadata, RecordedAt: e.RecordedAt},
	}}
}

// parked decides a park of d against the fold: the dead letter to store,
// or why not.
func (f *letterFold) parked(d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	// A park updates only the failure of a dead letter already stored;
	// its ID, first failure and event stay.
	update := func(old eventstore.DeadLetter) eventstore.DeadLetter {
		old.Error, old.Attempts, old.LastFailure, old.ClaimedUntil = d.Error, d.Attempts, utc(d.LastFailure), utc(d.ClaimedUntil)
		old.Generation++
		return old
	}
	if d.Generation != 0 {
		old, ok := f.byID[d.ID]
		var stored *storekit.DeadLetterKey
		if ok {
			k := storekit.KeyOf(old)
			stored = &k
		}
		if err := storekit.CheckDeadLetterGeneration(d, stored); err != nil {
			return eventstore.DeadLetter{}, err
		}
		return update(old), nil
	}
	if old, ok := f.byID[d.ID]; ok && d.ID != "" {
		if err := storekit.CheckDeadLetterID(d, old.Event.StreamID, old.Event.ID, old.Part); err != nil {
			return eventstore.DeadLetter{}, err
		}
	}
	if id, ok := f.byKey[keyOf(&d)]; ok {
		return update(f.byID[id]), nil
	}
	if d.ID == "" {
		d.ID = ulid.Make().String()
	}
	d.Generation = 1
	d.FirstFailure, d.LastFailure, d.ClaimedUntil = utc(d.FirstFailure), utc(d.LastFailure), utc(d.ClaimedUntil)
	d.Event.RecordedAt = utc(d.Event.RecordedAt)
	d.Event.EventData = d.Event.EventData.Clone()
	return d, nil
}

// utc is t in UTC, as the store returns its times; the zero time stays
// zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// copyLetter returns d sharing no memory with the fold.
func copyLetter(d eventstore.DeadLetter) eventstore.DeadLetter {
	d.Event.EventData = d.Event.EventData.Clone()
	return d
}

// letters returns the fold of consumer's dead letters, locked and read up
// to the stream's end; the caller calls unlock when done with it.
func (s *Store) letters(ctx context.Context, consumer string) (f *letterFold, unlock func(), err error) {
	f = s.caches().letters.GetOrAdd(consumer, func() *letterFold { return newLetterFold(consumer) })
	select {
	case f.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.done:
		return nil, nil, eventstore.ErrClosed
	}
	unlock = func() { <-f.lock }
	if err := s.tail(ctx, f); err != nil {
		unlock()
		return nil, nil, err
	}
	return f, unlock, nil
}

// tailRestarts bounds how often a fold starts over because a compaction
// elsewhere truncated the records it had yet to read.
const tailRestarts = 8

// tail folds the records appended to f's stream since f last read it.
func (s *Store) tail(ctx context.Context, f *letterFold) error {
	for restarts := 0; ; {
		read, gap := 0, false
		exists, err := s.readStream(ctx, f.stream, f.next, false, letterPage, func(r *esdb.RecordedEvent) (bool, error) {
			read++
			if f.folded && r.EventNumber != f.next {
				// Records the fold has not read were truncated by a
				// compaction; what they did is lost to this fold, but not
				// to one from the start.
				gap = true
				return false, nil
			}
			if !f.folded {
				f.folded, f.since = true, r.EventNumber // the first after any $tb
			}
			if err := f.apply(r); err != nil {
				return false, err
			}
			f.next = r.EventNumber + 1
			return true, nil
		})
		switch {
		case err != nil:
			return err
		case !exists && f.folded:
			// Deleted outside Cairn: what it held is gone, and a write
			// makes it again.
			f.reset()
			return nil
		case gap:
			if restarts++; restarts > tailRestarts {
				return fmt.Errorf("kurrentdb: read the dead letters of consumer %q: %w: compacted under the read %d times",
					f.consumer, eventstore.ErrUnavailable, restarts-1)
			}
			f.reset()
		case read < letterPage:
			return nil
		}
	}
}

// writeLetters appends recs to f's stream after what f read, and moves f
// past them. A wrong expected version is returned as the client's error.
func (s *Store) writeLetters(ctx context.Context, f *letterFold, recs ...record) error {
	first := f.next
	last, err := s.appendRecords(ctx, f.stream, f.expected(), recs...)
	if err != nil {
		return err
	}
	switch n := uint64(len(recs)); {
	case !f.folded:
		// The stream's first records, or the first since it was deleted
		// outside Cairn, whose revisions go on from before.
		f.folded, f.since, f.next = true, last+1-n, last+1
	case last+1-n == first:
		f.next = last + 1
	default:
		// Not where the expected revision put them: trust nothing
		// remembered, and read the stream again.
		f.reset()
	}
	return nil
}
