package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// eventReaders is the pool of read-only connections behind ReadStream,
// ReadAll and Subscribe. Like the writer's appendConn, they speak SQLite's
// own API: each connection prepares a statement once and keeps it, and
// events are decoded straight from the statement (see stmtRow), without
// database/sql's conversions; reads got two to three times faster. The
// rarer reads of the consumer tables stay on database/sql (Store.readers).
//
// The pool is a channel of connections rather than sqlitex.Pool, whose
// Take hands every connection a context and a goroutine that waits to
// interrupt it: a goroutine started and stopped per read, a tenth of a
// short stream read's CPU, for interrupts these reads never use (see
// noInterrupt).
type eventReaders struct {
	free   chan *zs.Conn
	closed chan struct{}
	all    []*zs.Conn
	once   sync.Once
}

func openEventReaders(abs string, opts Options) (r *eventReaders, err error) {
	r = &eventReaders{free: make(chan *zs.Conn, opts.MaxReaders), closed: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = r.close()
		}
	}()
	for range opts.MaxReaders {
		conn, err := zs.OpenConn(fileURI(abs, "mode=ro"), zs.OpenReadOnly|zs.OpenURI)
		if err != nil {
			return nil, err
		}
		r.all = append(r.all, conn)
		conn.SetBusyTimeout(opts.BusyTimeout)
		r.free <- conn
	}
	return r, nil
}

// errReadersClosed is what a read that waits for a connection gets once
// the store closes; readErr reports it as [eventstore.ErrClosed].
var errReadersClosed = errors.New("sqlite: the event readers are closed")

// with runs fn on a connection of the pool, waiting for one while ctx
// allows. fn's statements are not interrupted when ctx ends (see
// noInterrupt); a page is small. A connection is never used inside a
// transaction that it was left in (by an error, or a panic that the caller
// recovered): it would read an old snapshot forever.
func (r *eventReaders) with(ctx context.Context, fn func(conn *zs.Conn) error) (err error) {
	var conn *zs.Conn
	select {
	case conn = <-r.free:
	default:
		select {
		case conn = <-r.free:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.closed:
			return errReadersClosed
		}
	}
	defer func() {
		if rerr := leaveReadTx(conn); err == nil {
			err = rerr
		}
		r.free <- conn
	}()
	if err := leaveReadTx(conn); err != nil {
		return err
	}
	return fn(conn)
}

// leaveReadTx rolls back the transaction conn is in, if any.
func leaveReadTx(conn *zs.Conn) error {
	if conn.AutocommitEnabled() {
		return nil
	}
	return execute(conn, "ROLLBACK")
}

// close waits for every connection to come back, and closes them all.
func (r *eventReaders) close() error {
	var errs []error
	r.once.Do(func() {
		close(r.closed)
		for range r.all {
			errs = append(errs, (<-r.free).Close())
		}
	})
	return errors.Join(errs...)
}

// execute runs a statement that returns nothing the caller needs,
// preparing it once per connection.
func execute(conn *zs.Conn, query string) error {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return err
	}
	return step(stmt)
}

// queryEvents runs query with args on conn and decodes every row it
// returns as an event, up to limit events or a full page (see
// [storekit.PageFull]). The statement stays prepared on conn, one per query
// text: the page queries take few shapes (by the number of types and
// stream prefixes in a filter, not their values).
//
// stream, when not empty, is the stream that the query selects by equality
// (stream = ?): column 1 then holds exactly its bytes, and is not read.
//
// dst, when not nil, is a page buffer lent by the caller: the events are
// appended to it and it is returned. Otherwise the page is a new slice.
func queryEvents(conn *zs.Conn, dst []eventstore.Event, query string, args []any, limit int, stream string) (events []eventstore.Event, full bool, err error) {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if rerr := stmt.Reset(); err == nil && rerr != nil {
			err = rerr
		}
	}()
	if err := bindAll(stmt, args); err != nil {
		return nil, false, err
	}
	sc := scratchPool.Get().(*pageScratch)
	defer sc.put()
	sc.row.stmt, sc.row.stream = stmt, stream
	// The page is decoded into the scratch slice, which keeps its capacity
	// from read to read, and copied out at its exact length: a read of a
	// missing stream allocates nothing, and one of 100 events one slice of
	// 100, rather than a slice grown from a guess.
	page, lent := sc.events[:0], dst != nil
	if lent {
		page = dst
	}
	defer func() {
		switch {
		case !lent:
			sc.events = page
		case err != nil:
			clear(page) // what was decoded belongs to no one
		}
	}()
	size := 0
	for {
		found, err := stmt.Step()
		if err != nil {
			return nil, false, err
		}
		if !found {
			break
		}
		page = append(page, eventstore.Event{})
		e := &page[len(page)-1]
		if err := decodeEventInto(&sc.row, e, &sc.extras); err != nil {
			return nil, false, err
		}
		size += storekit.PageBytes(e)
		if storekit.PageFull(len(page), limit, size) {
			full = true // the statement is reset unstepped further
			break
		}
	}
	if lent {
		return page, full, nil
	}
	if len(page) > 0 {
		events = make([]eventstore.Event, len(page))
		copy(events, page)
	}
	return events, full, nil
}

// pageScratch is what a page read reuses from one read to the next: the
// slice it decodes into and the strings it has seen.
type pageScratch struct {
	events []eventstore.Event
	row    stmtRow
	extras extraCache
}

var scratchPool = sync.Pool{New: func() any { return new(pageScratch) }}

// maxScratchEvents bounds the slice a pageScratch keeps between reads.
const maxScratchEvents = storekit.DefaultPageSize

func (sc *pageScratch) put() {
	// The slice drops the events' data, which now belong to the caller;
	// the remembered strings and metadata stay, to be met again.
	clear(sc.events)
	if cap(sc.events) > maxScratchEvents {
		sc.events = nil
	}
	sc.events = sc.events[:0]
	sc.row.stmt, sc.row.stream = nil, ""
	scratchPool.Put(sc)
}

// stmtRow is the current row of an event reader's statement. The events of
// a page mostly repeat their stream, type and metadata, so it keeps the last
// string of each text column and returns it again when the bytes match,
// rather than allocating a copy per event.
type stmtRow struct {
	stmt    *zs.Stmt
	last    [12]string
	scratch []byte
	slab    []byte // the unused end of the current slab (see alloc)
	// stream, when not empty, is what column 1 holds in every row: the
	// query selected by stream = ?, and SQLite compares TEXT byte by byte
	// (a STRICT TEXT column holds nothing else that could compare equal).
	stream string
}

func (r *stmtRow) integer(i int) (int64, bool) {
	if r.stmt.ColumnType(i) != zs.TypeInteger {
		return 0, false
	}
	return r.stmt.ColumnInt64(i), true
}

func (r *stmtRow) text(i int) (string, bool) {
	if i == 1 && r.stream != "" {
		return r.stream, true
	}
	if r.stmt.ColumnType(i) != zs.TypeText {
		return "", false
	}
	return r.textAt(i), true
}

func (r *stmtRow) optionalText(i int) (string, bool) {
	switch r.stmt.ColumnType(i) {
	case zs.TypeNull:
		return "", true
	case zs.TypeText:
		return r.textAt(i), true
	}
	return "", false
}

// textAt returns column i, which holds text, reusing the column's last
// string when the bytes match (see stmtRow).
func (r *stmtRow) textAt(i int) string {
	if n := r.stmt.ColumnLen(i); n == len(r.last[i]) {
		r.scratch = slices.Grow(r.scratch[:0], n)[:n]
		r.stmt.ColumnBytes(i, r.scratch)
		if string(r.scratch) != r.last[i] {
			r.last[i] = string(r.scratch)
		}
		return r.last[i]
	}
	r.last[i] = r.stmt.ColumnText(i)
	return r.last[i]
}

func (r *stmtRow) blob(i int, dst []byte) ([]byte, bool) {
	if r.stmt.ColumnType(i) != zs.TypeBlob {
		return nil, false
	}
	n := r.stmt.ColumnLen(i)
	if cap(dst) < n {
		dst = r.alloc(n)
	}
	dst = dst[:n]
	r.stmt.ColumnBytes(i, dst)
	return dst, true
}

// Event data of up to slabMax bytes is cut from slabs of slabSize bytes, so
// that a page of small events makes one allocation for their data rather
// than one per event. Each event's data is capped at its length (an append
// to it copies, never writes into its neighbor's), and it keeps at most its
// slab alive.
const (
	slabSize = 4096
	slabMax  = 256
)

// alloc returns n bytes for the caller to keep.
func (r *stmtRow) alloc(n int) []byte {
	if n > slabMax {
		return make([]byte, n)
	}
	if len(r.slab) < n {
		r.slab = make([]byte, slabSize)
	}
	b := r.slab[:n:n]
	r.slab = r.slab[n:]
	return b
}

func (r *stmtRow) null(i int) bool { return r.stmt.ColumnType(i) == zs.TypeNull }

func (r *stmtRow) describe(i int) string {
	switch r.stmt.ColumnType(i) {
	case zs.TypeNull:
		return "NULL"
	case zs.TypeBlob:
		return fmt.Sprintf("a blob of %d bytes", r.stmt.ColumnLen(i))
	case zs.TypeText:
		return fmt.Sprintf("text of %d bytes", r.stmt.ColumnLen(i))
	case zs.TypeInteger:
		return fmt.Sprint(r.stmt.ColumnInt64(i))
	default:
		return fmt.Sprint(r.stmt.ColumnFloat(i))
	}
}

// bindAll binds the arguments of the queries this package builds.
func bindAll(stmt *zs.Stmt, args []any) error {
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			stmt.BindInt64(i+1, v)
		case int:
			stmt.BindInt64(i+1, int64(v))
		case string:
			stmt.BindText(i+1, v)
		default:
			return fmt.Errorf("sqlite: internal error: cannot bind a %T", a)
		}
	}
	return nil
}
