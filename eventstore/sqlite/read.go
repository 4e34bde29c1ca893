package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

const sqlTip = `SELECT coalesce(max(position), 0) FROM cairn_events`

const eventColumns = `position, stream, version, id, type, schema_version, data,
	correlation_id, causation_id, command_id, extra, recorded_at`

const (
	sqlStreamForward = `SELECT ` + eventColumns + ` FROM cairn_events
		WHERE stream = ? AND version >= ? ORDER BY version LIMIT `
	sqlStreamBackward = `SELECT ` + eventColumns + ` FROM cairn_events
		WHERE stream = ? AND version <= ? ORDER BY version DESC LIMIT `
)

// Page queries write their LIMIT into the SQL text rather than bind it.
// SQLite built with STAT4 (modernc.org/sqlite is) lets the planner read a
// bound LIMIT, and then marks the statement to be prepared again whenever
// that parameter is bound anew: every page read re-parsed its SQL, a sixth
// of a 100-event stream read's CPU. A literal LIMIT keeps one prepared
// statement per query shape on each connection; the reader stops stepping
// at the caller's limit (see queryEvents), which may be smaller.
var (
	streamForward  = sqlStreamForward + strconv.Itoa(storekit.DefaultPageSize)
	streamBackward = sqlStreamBackward + strconv.Itoa(storekit.DefaultPageSize)
)

// statementLimit is the LIMIT written into a page query that returns at most
// limit rows: the default page size, or the power of two at or above a
// larger limit, so that the shapes stay few whatever page sizes callers ask
// for. It is never below limit: a page cut short by its statement would
// look like the end of the log.
func statementLimit(limit int) int64 {
	n := int64(storekit.DefaultPageSize)
	for n < int64(limit) && n <= math.MaxInt64/2 {
		n *= 2
	}
	return max(n, int64(limit))
}

// streamQuery is the stream read for a page of at most limit events.
func streamQuery(backward bool, limit int) string {
	if limit <= storekit.DefaultPageSize {
		if backward {
			return streamBackward
		}
		return streamForward
	}
	n := strconv.FormatInt(statementLimit(limit), 10)
	if backward {
		return sqlStreamBackward + n
	}
	return sqlStreamForward + n
}

// ReadStream implements [eventstore.Store.ReadStream], a page at a time.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadOptions) iter.Seq2[eventstore.Event, error] {
	return storekit.ReadStreamPagesInto(ctx, stream, opts, s.pageOfStream, storekit.DefaultPageSize)
}

var _ storekit.PagedStreams = (*Store)(nil)

// StreamPages implements [storekit.PagedStreams]: ReadStream's page reader.
func (s *Store) StreamPages() (storekit.StreamPageAppender, int, eventstore.Store) {
	return s.pageOfStream, storekit.DefaultPageSize, s
}

func (s *Store) streamPage(ctx context.Context, page []eventstore.Event, stream string, from uint64, backward bool, limit int) ([]eventstore.Event, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	query := streamQuery(backward, limit)
	events := page[:0]
	if events == nil {
		events = []eventstore.Event{} // not nil: queryEvents appends to a lent page
	}
	err := s.events.with(ctx, func(conn *zs.Conn) (err error) {
		events, _, err = queryEvents(conn, events, query, []any{stream, int64(from)}, limit, stream)
		return err
	})
	if err != nil {
		return nil, s.readErr(ctx, err, "read stream "+quote(stream))
	}
	return events, nil
}

// noInterrupt is the context of every statement. Given a context that can
// end, the driver interrupts the connection when it does, and an interrupt
// that lands as a BEGIN or ROLLBACK finishes can leave the pooled connection
// inside a transaction, reading an old snapshot forever. A page is small,
// so reads check the caller's context between statements instead.
var noInterrupt = context.Background()

// readPage is the one page reader behind ReadAll and Subscribe. The end of
// the log (Through) is read in the same transaction as the events, so a
// page never claims to have looked past an event it did not see.
func (s *Store) readPage(ctx context.Context, after eventstore.Position, filter eventstore.Filter, limit int) (storekit.Page, error) {
	if err := s.readable(ctx); err != nil {
		return storekit.Page{}, err
	}
	page := storekit.Page{Through: after}
	if after.Major >= math.MaxInt64 {
		return page, nil // past any rowid SQLite can hold
	}
	query, args := pageQuery(after, filter, limit, s.typeIndex)
	var tip int64
	err := s.events.with(ctx, func(conn *zs.Conn) (err error) {
		if err := execute(conn, "BEGIN"); err != nil {
			return err
		}
		stmt, err := conn.Prepare(sqlTip)
		if err != nil {
			return err
		}
		if _, err := stmt.Step(); err != nil {
			return err
		}
		tip = stmt.ColumnInt64(0)
		if err := stmt.Reset(); err != nil {
			return err
		}
		if page.Events, page.Full, err = queryEvents(conn, nil, query, args, limit, ""); err != nil {
			return err
		}
		return execute(conn, "COMMIT")
	})
	if err != nil {
		return storekit.Page{Through: after}, s.readErr(ctx, err, "read all")
	}
	if page.Full {
		page.Through = page.Events[len(page.Events)-1].Position
	} else if end := (eventstore.Position{Major: uint64(tip)}); after.Before(end) {
		page.Through = end
	}
	return page, nil
}

// A filter with at most this many types or prefixes is answered by
// statements that list them; a longer list is passed as one JSON array
// parameter, so that no statement grows with the filter (SQLite caps a
// compound SELECT at 500 terms, and each shape is a prepared statement kept
// by the connection).
const (
	maxListedTypes    = 8
	maxListedPrefixes = 8
)

// pageQuery builds the query for one page of the global log. Each shape
// reads in position order, so a page costs its own size plus the events it
// skips, never a sort of everything that matches:
//   - no type filter, more than maxListedTypes types, or several types in
//     a file without the type index: the rowid, with types and stream
//     prefixes checked row by row (the unary plus keeps SQLite off the
//     stream index, which would find a whole category and sort it for
//     every page);
//   - one type: the type index, which holds (type, position), when the
//     file has it ([Options.TypeIndex]), else the rowid as above;
//   - up to maxListedTypes types in a file with the type index: one
//     ordered, limited scan of the index per type, merged.
func pageQuery(after eventstore.Position, filter eventstore.Filter, limit int, typeIndex bool) (string, []any) {
	var b strings.Builder
	var args []any
	limitClause := " LIMIT " + strconv.FormatInt(statementLimit(limit), 10)
	// {Major, Minor > 0} sorts after {Major, 0}, which is the only position
	// this store gives rowid Major: the next event is still Major+1.
	scan := func(columns string, typ *string, types []string) {
		b.WriteString("SELECT " + columns + " FROM cairn_events WHERE position > ?")
		args = append(args, int64(after.Major))
		switch {
		case typ != nil:
			b.WriteString(" AND type = ?")
			args = append(args, *typ)
		case types != nil:
			b.WriteString(" AND +type IN (SELECT value FROM json_each(?))")
			args = append(args, jsonArray(types))
		}
		if ranges, all := prefixRanges(filter.StreamPrefixes); !all {
			if len(ranges) > maxListedPrefixes {
				// substr and length count characters; prefixes and names
				// are valid UTF-8, so a character prefix is a byte prefix.
				b.WriteString(" AND EXISTS (SELECT 1 FROM json_each(?) AS p WHERE substr(stream, 1, length(p.value)) = p.value)")
				args = append(args, jsonArray(filter.StreamPrefixes))
			} else {
				b.WriteString(" AND (")
				for i, r := range ranges {
					if i > 0 {
						b.WriteString(" OR ")
					}
					if r.bounded {
						b.WriteString("(+stream >= ? AND +stream < ?)")
						args = append(args, r.from, r.to)
					} else {
						b.WriteString("+stream >= ?")
						args = append(args, r.from)
					}
				}
				b.WriteString(")")
			}
		}
		b.WriteString(" ORDER BY position" + limitClause)
	}
	types := slices.Compact(slices.Sorted(slices.Values(filter.Types)))
	switch {
	case len(types) == 0:
		scan(eventColumns, nil, nil)
	case len(types) == 1:
		scan(eventColumns, &types[0], nil)
	case len(types) > maxListedTypes || !typeIndex:
		scan(eventColumns, nil, types)
	default:
		// The merge picks the page's positions from the index alone, and
		// only then reads those events: merging whole rows read every
		// type's candidates and sorted them, several times the page.
		b.WriteString("SELECT " + eventColumns + " FROM cairn_events WHERE position IN (SELECT position FROM (")
		for i := range types {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			b.WriteString("SELECT * FROM (")
			scan("position", &types[i], nil)
			b.WriteString(")")
		}
		b.WriteString(") ORDER BY position" + limitClause + ") ORDER BY position")
	}
	return b.String(), args
}

// jsonArray encodes strings as a JSON array for json_each. Filters are
// valid UTF-8 (see [eventstore.Filter.Validate]), so encoding cannot fail.
func jsonArray(values []string) string {
	b, _ := json.Marshal(values)
	return string(b)
}

type streamRange struct {
	from, to string
	bounded  bool
}

// prefixRanges turns stream prefixes into ranges of names, which the
// (stream, version) index answers; all reports that some prefix is empty and
// so selects every stream. SQLite compares text byte by byte, like
// strings.HasPrefix.
func prefixRanges(prefixes []string) (ranges []streamRange, all bool) {
	if len(prefixes) == 0 {
		return nil, true
	}
	for _, p := range prefixes {
		if p == "" {
			return nil, true
		}
		r := streamRange{from: p}
		b := []byte(p)
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] < 0xff {
				b[i]++
				r.to, r.bounded = string(b[:i+1]), true
				break
			}
		}
		ranges = append(ranges, r)
	}
	return ranges, false
}

// readable fails fast on a canceled context or a closed store.
func (s *Store) readable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed() {
		return eventstore.ErrClosed
	}
	return nil
}

// readErr explains a failed read: the context's end, the store's closing, or
// SQLite's error.
func (s *Store) readErr(ctx context.Context, err error, what string) error {
	var ce *CorruptError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case s.closed():
		return eventstore.ErrClosed
	case errors.As(err, &ce):
		return err
	}
	if fe := s.fileFailure(what, err); fe != err {
		return fe
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

// isBusy reports a lock held by another connection or process, which a
// later read will get past.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	switch zs.ErrCode(err).ToPrimary() { // from the event readers
	case zs.ResultBusy, zs.ResultLocked:
		return true
	}
	return false
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
