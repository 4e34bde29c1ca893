package kurrentdb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/lru"
)

// The kinds of state the store keeps, each in streams of its own: the
// kind is the part of a state stream's name after [StatePrefix].
const (
	checkpointKind = "checkpoint"
	leaseKind      = "lease"
	deadLetterKind = "deadletters"
	snapshotKind   = "snapshot"
)

// stateHistory is the $maxCount of the checkpoint and lease streams: their
// last record is their state, and the few before it are kept only for an
// operator who wonders how it got there.
const stateHistory = 16

// stateStream returns the stream that keeps kind's state for key (a
// consumer's name, or the stream a snapshot is of).
//
// Keys are any printable UTF-8 up to storekit.MaxStreamLen bytes, so the
// name cannot always be the prefix and the key: that would be longer than
// the store lets any stream be. A key that fits follows its kind and a
// "-" ("cairn:checkpoint-orders"), readable in KurrentDB's UI; a longer
// one is replaced by its SHA-256 after a "#", which no short name has in
// that place, followed by its first bytes for the reader. So two keys
// never share a stream (short keys are themselves; long keys differ in
// their hash), and no key reaches another kind's streams (kinds contain
// neither "-" nor "#"). The records repeat their key, which the store
// checks on reading them.
func stateStream(kind, key string) string {
	short := StatePrefix + kind + "-" + key
	if len(short) <= storekit.MaxStreamLen {
		return short
	}
	sum := sha256.Sum256([]byte(key))
	head := key[:64]
	for !utf8.ValidString(head) { // cut at a rune's start
		head = head[:len(head)-1]
	}
	return StatePrefix + kind + "#" + hex.EncodeToString(sum[:]) + "/" + head
}

// stateCaches is what a store remembers of its state streams, to spare
// the server calls that it would otherwise repeat.
type stateCaches struct {
	once sync.Once
	// limited holds the snapshot streams whose $maxCount this process has
	// set, or found set: a snapshot is saved without reading first.
	limited *lru.Cache[struct{}]
	letters *lru.Cache[*letterFold]
	// compactAfter is how many superseded records a dead-letter stream
	// gathers before it is compacted; tests lower it.
	compactAfter int
}

// Bounds of the store's caches of its state streams.
const (
	limitedStreams = 4096
	// foldedConsumers bounds the consumers whose dead letters a store keeps
	// folded in memory: dead letters are failures, so a few consumers have
	// a few; one that is evicted is folded again from its stream.
	foldedConsumers = 256
	// defaultCompactAfter: see stateCaches.compactAfter.
	defaultCompactAfter = 256
)

// caches returns the store's caches of its state streams, made on first
// use so that a Store needs no set-up for them.
func (s *Store) caches() *stateCaches {
	c := &s.state
	c.once.Do(func() {
		c.limited = lru.New[struct{}](limitedStreams)
		c.letters = lru.New[*letterFold](foldedConsumers)
		if c.compactAfter <= 0 {
			c.compactAfter = defaultCompactAfter
		}
	})
	return c
}

// usable returns ctx's error, or ErrClosed once the store is closed: every
// consumer-state method asks it after checking its input, so that it
// answers as the event methods do without calling the server.
func (s *Store) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return eventstore.ErrClosed
	}
	return nil
}

// record is one record to append to a state stream. KurrentDB keeps it as
// an event whose metadata is fields as JSON and whose data is payload: the
// bytes of a snapshot, or of a parked event, kept as they are rather than
// in base64 inside the JSON, which would make them a third larger against
// KurrentDB's limit on the size of an append.
type record struct {
	typ     string
	fields  any
	payload []byte
}

// lastRecord reads the last record of the state stream; nil when it has
// none.
func (s *Store) lastRecord(ctx context.Context, stream string) (*esdb.RecordedEvent, error) {
	var last *esdb.RecordedEvent
	_, err := s.readStream(ctx, stream, math.MaxUint64, true, 1, func(r *esdb.RecordedEvent) (bool, error) {
		last = r
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return last, nil
}

// after is the expected revision of a write that follows last, the last
// record read (nil when the stream had none): the compare-and-set that
// makes every write to a state stream fail when another came in between.
func after(last *esdb.RecordedEvent) esdb.ExpectedRevision {
	if last == nil {
		return esdb.NoStream{}
	}
	return esdb.Revision(last.EventNumber)
}

// appendRecords appends recs to the state stream at expected, and returns
// the revision of the last. A wrong expected version is returned as the
// client's error (match it with isWrongVersion), for the caller to read
// again and decide again; other errors are the store's.
func (s *Store) appendRecords(ctx context.Context, stream string, expected esdb.ExpectedRevision, recs ...record) (uint64, error) {
	out := make([]esdb.EventData, len(recs))
	for i, r := range recs {
		meta, err := json.Marshal(r.fields)
		if err != nil {
			return 0, fmt.Errorf("kurrentdb: append to %q: encoding a %s record: %w", stream, r.typ, err)
		}
		// Fresh IDs at every attempt: KurrentDB would take a retry with
		// the IDs of a write it holds for a repeat, and write nothing.
		out[i] = esdb.EventData{EventID: eventstore.NewEventID(), EventType: r.typ, ContentType: esdb.ContentTypeBinary,
			Data: r.payload, Metadata: meta}
	}
	// The store wrote every record itself, so a refusal is of its size: a
	// snapshot or a parked event near storekit.MaxEventSize, with its
	// record, on a server with a small MaxAppendSize.
	res, err := s.appendToStream(ctx, stream, expected, out, true)
	switch {
	case err == nil:
		return res.NextExpectedVersion, nil
	case isWrongVersion(err) && s.isClosed():
		return 0, eventstore.ErrClosed
	}
	return 0, err
}

// limitStream sets the $maxCount of a state stream that is about to be
// written for the first time, so that KurrentDB keeps only its last
// maxCount records. It writes only when the stream has no metadata yet
// (one write wins when several processes race, and an operator's
// metadata is left alone), and before the stream's first record, so that
// no crash leaves a stream that grows for good.
func (s *Store) limitStream(ctx context.Context, stream string, maxCount uint64) error {
	var meta esdb.StreamMetadata
	meta.SetMaxCount(maxCount)
	err := s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
		_, err := cli.SetStreamMetadata(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, meta)
		return err
	})
	if isWrongVersion(err) && !s.isClosed() {
		return nil // set already
	}
	return s.fail(ctx, fmt.Sprintf("set the $maxCount of %q", stream), err)
}

// truncateBefore makes KurrentDB leave the records of the state stream
// before revision rev out of every read (and scavenge them). The store
// owns its streams' metadata, so it writes all of it, and only ever raises
// the truncation: the metadata is written at the revision it was read at,
// so that a compaction that comes late never lowers the truncation of a
// later one below records that a scavenge may already have removed.
func (s *Store) truncateBefore(ctx context.Context, stream string, rev uint64) error {
	metastream := "$$" + stream
	for attempt := 1; ; attempt++ {
		last, err := s.lastRecord(ctx, metastream)
		if err != nil {
			return err
		}
		var meta esdb.StreamMetadata
		expected := after(last)
		if last != nil {
			current, err := esdb.StreamMetadataFromJson(last.Data)
			if err != nil {
				return fmt.Errorf("%w: kurrentdb: the metadata of %q: %v", eventstore.ErrCorrupt, stream, err)
			}
			if tb := current.TruncateBefore(); tb != nil && *tb >= rev {
				return nil // truncated as far already
			}
			meta = *current
		}
		meta.SetTruncateBefore(rev)
		err = s.call(ctx, func(ctx context.Context, cli *esdb.Client) error {
			_, err := cli.SetStreamMetadata(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: expected}, meta)
			return err
		})
		if isWrongVersion(err) && attempt < raceAttempts && !s.isClosed() {
			continue // another write of the metadata came between: read it again
		}
		return s.fail(ctx, fmt.Sprintf("truncate %q before %d", stream, rev), err)
	}
}

// decodeRecord reads the fields of r, a record of the state stream that
// must be of type typ, into v: strictly, so that a record this store did
// not write, or wrote in a layout it no longer knows, is
// [eventstore.ErrCorrupt] rather than a state made up of zero values.
func decodeRecord(stream string, r *esdb.RecordedEvent, typ string, v any) error {
	if r.EventType != typ {
		return corruptRecord(stream, r, fmt.Sprintf("is a %q, not a %q", r.EventType, typ))
	}
	dec := json.NewDecoder(bytes.NewReader(r.UserMetadata))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return corruptRecord(stream, r, fmt.Sprintf("has metadata that is not a %s: %v", typ, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return corruptRecord(stream, r, fmt.Sprintf("has data after its %s in its metadata", typ))
	}
	return nil
}

// corruptRecord reports a record of the state stream that the store cannot
// read, or that is not what its stream keeps.
func corruptRecord(stream string, r *esdb.RecordedEvent, reason string) error {
	return fmt.Errorf("%w: kurrentdb: record %d of state stream %q %s", eventstore.ErrCorrupt, r.EventNumber, stream, reason)
}

// lostRace is the error of a write to a state stream that found another
// writer ahead of it attempts times in a row: the stream is too busy for
// now, which is worth a retry later.
func lostRace(what string, attempts int) error {
	return fmt.Errorf("kurrentdb: %s: %w: lost the race to other writers %d times", what, eventstore.ErrUnavailable, attempts)
}
