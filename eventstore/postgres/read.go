package postgres

import (
	"context"
	"encoding/json"
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
	return storekit.ReadStreamPages(ctx, stream, opts, s.streamPage, s.pageSize)
}

func (s *Store) streamPage(ctx context.Context, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	sql := s.sql.streamFwd
	if backward {
		sql = s.sql.streamBwd
	}
	page, err := s.queryEvents(ctx, sql, limit, stream, int64(from), limit)
	if err != nil {
		return nil, s.closedOr(fmt.Errorf("postgres: reading stream %q from version %d: %w", stream, from, err))
	}
	return page, nil
}

// queryEvents reads the events sql selects, up to limit of them and until
// the page is full by [storekit.PageFull]; the rows after that are
// passed over by the driver, not kept.
func (s *Store) queryEvents(ctx context.Context, sql string, limit int, args ...any) ([]eventstore.Event, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []eventstore.Event
	var r rawEvent
	size := 0
	for rows.Next() {
		if err := rows.Scan(r.dest()...); err != nil {
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

// rawEvent is an events row as scanned, before it is checked.
type rawEvent struct {
	txID          uint64
	seq           int64
	stream        string
	version       int64
	id            pgtype.UUID
	typ           string
	schemaVersion int64
	data          []byte
	corr, caus    string
	cmd           string
	extra         []byte
	recordedAt    time.Time
}

func (r *rawEvent) dest() []any {
	return []any{&r.txID, &r.seq, &r.stream, &r.version, &r.id, &r.typ, &r.schemaVersion, &r.data,
		&r.corr, &r.caus, &r.cmd, &r.extra, &r.recordedAt}
}

// event checks the row and turns it into an event. Its slices are fresh
// copies per row (pgx allocates them on scan), so events share no memory.
func (r *rawEvent) event() (eventstore.Event, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: stream %q, version %d, type %q: %s", eventstore.ErrCorrupt, r.stream, r.version, r.typ, what)
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
	e := eventstore.Event{
		EventData: eventstore.EventData{
			ID:            r.id.Bytes,
			Type:          r.typ,
			SchemaVersion: uint32(r.schemaVersion),
			Data:          r.data,
			Metadata: eventstore.Metadata{
				CorrelationID: r.corr,
				CausationID:   r.caus,
				CommandID:     r.cmd,
			},
		},
		StreamID:   r.stream,
		Version:    uint64(r.version),
		Position:   eventstore.Position{Major: r.txID, Minor: uint64(r.seq)},
		RecordedAt: r.recordedAt.UTC(),
	}
	if e.Data == nil {
		e.Data = []byte{}
	}
	if len(r.extra) > 0 && string(r.extra) != "null" {
		if err := json.Unmarshal(r.extra, &e.Metadata.Extra); err != nil {
			return eventstore.Event{}, bad(fmt.Sprintf("metadata is not an object of strings: %v", err))
		}
		if len(e.Metadata.Extra) == 0 {
			e.Metadata.Extra = nil
		}
	}
	r.data, r.extra = nil, nil
	return e, nil
}

// corruptRow reports a row that does not scan into an event: its columns
// were changed by something other than the store.
func corruptRow(err error) error {
	return fmt.Errorf("%w: an events row does not decode: %v", eventstore.ErrCorrupt, err)
}
