package postgres

import (
	"context"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// ReadStream implements [eventstore.Store.ReadStream], a page at a time.
// Stream reads see every committed event of the stream at once; only the
// global order waits for older transactions.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadStreamPagesInto(ctx, stream, opts, s.pageOfStream, s.pageSize)
}

var _ storekit.PagedStreams = (*Store)(nil)

// StreamPages implements [storekit.PagedStreams]: ReadStream's page reader.
func (s *Store) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	return s.pageOfStream, s.pageSize, s
}

// streamPage appends to page the events of stream from version from on (or
// back), up to limit of them.
func (s *Store) streamPage(ctx context.Context, page []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	sql := s.sql.streamFwd
	if backward {
		sql = s.sql.streamBwd
	}
	page, err := s.queryEvents(ctx, page, sql, limit, stream, int64(from), limit)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: reading stream %q from version %d: %w", stream, from, err))
	}
	return page, nil
}

// queryEvents appends to page the events sql selects, up to limit of them
// and until the page is full by [storekit.PageFull]; the rows after that
// are passed over by the driver, not kept.
func (s *Store) queryEvents(ctx context.Context, page []eventstore.Event, sql string, limit int, args ...any) ([]eventstore.Event, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var r rawEvent
	dest := r.dest()
	size := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, corruptRow(err)
		}
		e, err := r.event()
		if err != nil {
			return nil, err
		}
		page = append(page, e)
		size += storekit.PageBytes(&e)
		if storekit.PageFull(len(page), limit, size) {
			break
		}
	}
	return page, rows.Err()
}

// ReadAll implements [eventstore.Store.ReadAll]. It yields every event
// committed before the call, in global order. To do so it may wait for
// transactions that were running when it started to end (see [Store.Lag]);
// ctx bounds that wait. Do not call it while the same goroutine holds a
// writing transaction open (one that used [Store.AppendTx]): it may wait
// for that transaction until ctx ends.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, filter eventstore.Filter) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		if err := filter.Validate(); err != nil {
			yield(eventstore.Event{}, err)
			return
		}
		var target uint64 // the newest writing transaction when the read began
		wait := time.Millisecond
		for first := true; ; first = false {
			page, head, err := s.page(ctx, after, filter, s.pageSize)
			if err != nil {
				yield(eventstore.Event{}, err)
				return
			}
			if first {
				target = head
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
			if after.Before(page.Through) {
				after = page.Through
			}
			if page.Full {
				continue
			}
			if target < after.Major || (target == after.Major && after.Minor == math.MaxUint64) {
				return // the horizon passed every transaction that had committed events
			}
			// Events of a transaction older than the newest are not readable
			// until every transaction before it has ended.
			select {
			case <-ctx.Done():
				yield(eventstore.Event{}, ctx.Err())
				return
			case <-s.done:
				yield(eventstore.Event{}, eventstore.ErrClosed)
				return
			case <-time.After(wait):
				wait = min(2*wait, 50*time.Millisecond)
			}
		}
	}
}

// readPage is the [storekit.PageReader] of subscriptions.
func (s *Store) readPage(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (storekit.Page, error) {
	page, _, err := s.page(ctx, after, filter, limit)
	return page, err
}

// page reads up to limit events after position after, below the horizon of
// one snapshot. Through is the last event's position when the page is full,
// and otherwise the horizon: (xmin-1, MaxUint64), where xmin is the oldest
// transaction that was running when the snapshot was taken. Every
// transaction below xmin had ended, so each of their events is in the page,
// and every transaction that can still write has an ID of at least xmin, so
// every later event comes after Through. head is the ID of the newest
// transaction with events in the snapshot.
func (s *Store) page(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (page storekit.Page, head uint64, err error) {
	if err := s.checkOpen(); err != nil {
		return page, 0, err
	}
	if err := ctx.Err(); err != nil {
		return page, 0, err
	}
	// seq is a bigint; no row has a seq above MaxInt64, so clamping keeps
	// the comparison exact.
	minor := int64(min(after.Minor, math.MaxInt64))
	var types, prefixes []string
	if len(filter.Types) > 0 {
		types = filter.Types
	}
	if len(filter.StreamPrefixes) > 0 {
		prefixes = filter.StreamPrefixes
	}
	rows, err := s.pool.Query(ctx, s.sql.readAll, after.Major, minor, types, prefixes, limit)
	if err != nil {
		return page, 0, s.closedOr(fmt.Errorf("postgres: reading all events after %s: %w", after, err))
	}
	defer rows.Close()
	var xmin uint64
	var found bool
	var r rawEvent
	size := 0
	dest := append([]any{&xmin, &head, &found}, r.dest()...)
	page.Through = after
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return page, 0, corruptRow(err)
		}
		if !found {
			continue
		}
		e, err := r.event()
		if err != nil {
			return page, 0, err
		}
		page.Events = append(page.Events, e)
		size += storekit.PageBytes(&e)
		if page.Full = storekit.PageFull(len(page.Events), limit, size); page.Full {
			break // the rows after it are passed over by the driver, not kept
		}
	}
	if err := rows.Err(); err != nil {
		return page, 0, s.closedOr(fmt.Errorf("postgres: reading all events after %s: %w", after, err))
	}
	if page.Full {
		page.Through = page.Events[len(page.Events)-1].Position
	} else if horizon := (eventstore.Position{Major: xmin - 1, Minor: math.MaxUint64}); after.Before(horizon) {
		page.Through = horizon
	}
	return page, head, nil
}

// rawEvent is an events row as scanned, before it is checked. Its text
// columns are the driver's bytes, valid until the next row, and event turns
// them into strings only when they differ from the previous row's: the rows
// of a page mostly repeat their stream, type and metadata, so a page
// allocates little more than each event's data.
type rawEvent struct {
	txID            uint64
	seq             int64
	stream          pgtype.DriverBytes
	version         int64
	id              pgtype.UUID
	typ             pgtype.DriverBytes
	schemaVersion   int64
	data            []byte
	corr, caus, cmd pgtype.DriverBytes
	extra           []byte
	recordedAt      time.Time

	// The strings of the previous row, reused while the bytes repeat them.
	lastStream, lastType, lastCorr, lastCaus, lastCmd string
}

// dest is where rows.Scan puts the columns of [eventColumns]; take it once
// per query, not per row.
func (r *rawEvent) dest() []any {
	return []any{&r.txID, &r.seq, &r.stream, &r.version, &r.id, &r.typ, &r.schemaVersion, &r.data,
		&r.corr, &r.caus, &r.cmd, &r.extra, &r.recordedAt}
}

// reuse returns b as a string: *last when they are equal (no copy), and
// otherwise a new string, which becomes *last. Strings are immutable, so
// events may share them.
func reuse(b []byte, last *string) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// event checks the row and turns it into an event. Its slices are fresh
// copies per row (pgx allocates them on scan), so events share no memory.
func (r *rawEvent) event() (eventstore.Event, error) {
	stream, typ := reuse(r.stream, &r.lastStream), reuse(r.typ, &r.lastType)
	bad := func(what string) error {
		return fmt.Errorf("%w: stream %q, version %d, type %q: %s", eventstore.ErrCorrupt, stream, r.version, typ, what)
	}
	if r.version < 0 || r.seq < 0 {
		return eventstore.Event{}, bad(fmt.Sprintf("negative version or sequence (%d, %d)", r.version, r.seq))
	}
	if r.schemaVersion < 0 || r.schemaVersion > math.MaxUint32 {
		return eventstore.Event{}, bad(fmt.Sprintf("schema version %d is not a uint32", r.schemaVersion))
	}
	if !r.id.Valid {
		return eventstore.Event{}, bad("event ID is NULL")
	}
	extra, err := decodeExtra(r.extra)
	if err != nil {
		return eventstore.Event{}, bad(fmt.Sprintf("metadata is not an object of strings: %v", err))
	}
	data := r.data
	if data == nil {
		data = []byte{}
	}
	r.data, r.extra = nil, nil
	return eventstore.Event{
		EventData: eventstore.EventData{
			ID:            r.id.Bytes,
			Type:          typ,
			SchemaVersion: uint32(r.schemaVersion),
			Data:          data,
			Metadata: eventstore.Metadata{
				CorrelationID: reuse(r.corr, &r.lastCorr),
				CausationID:   reuse(r.caus, &r.lastCaus),
				CommandID:     reuse(r.cmd, &r.lastCmd),
				Extra:         extra,
			},
		},
		StreamID:   stream,
		Version:    uint64(r.version),
		Position:   eventstore.Position{Major: r.txID, Minor: uint64(r.seq)},
		RecordedAt: r.recordedAt.UTC(),
	}, nil
}

// decodeExtra decodes the extra column: nil for none (NULL, JSON null or
// an empty object). The map is declared here, not in event, because
// json.Unmarshal takes its address: that puts it on the heap, once per row
// if it were event's.
func decodeExtra(b []byte) (map[string]string, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	extra, err := storekit.DecodeExtraJSON(b)
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return nil, nil
	}
	return extra, nil
}

// corruptRow reports a row that does not scan into an event: its columns
// were changed by something other than the store.
func corruptRow(err error) error {
	return fmt.Errorf("%w: an events row does not decode: %v", eventstore.ErrCorrupt, err)
}
