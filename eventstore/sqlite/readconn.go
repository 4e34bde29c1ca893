package sqlite

import (
	"context"
	"fmt"

	zs "zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/cairn-es/cairn/eventstore"
)

// eventReaders is the pool of read-only connections behind ReadStream,
// ReadAll and Subscribe. Like the writer's appendConn, they speak SQLite's
// own API: each connection prepares a statement once and keeps it, and
// reads columns without database/sql's conversions, which made reading an
// event cost twice as much. The rarer reads of the consumer tables stay on
// database/sql (Store.readers).
type eventReaders struct {
	pool *sqlitex.Pool
}

func openEventReaders(abs string, opts Options) (*eventReaders, error) {
	pool, err := sqlitex.NewPool(fileURI(abs, "mode=ro"), sqlitex.PoolOptions{
		Flags:    zs.OpenReadOnly | zs.OpenURI,
		PoolSize: opts.MaxReaders,
		PrepareConn: func(conn *zs.Conn) error {
			conn.SetBusyTimeout(opts.BusyTimeout)
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &eventReaders{pool: pool}, nil
}

// with runs fn on a connection of the pool, waiting for one while ctx
// allows. fn's statements are not interrupted when ctx ends (see
// noInterrupt); a page is small. A connection that fn leaves inside a
// transaction is rolled back before it goes back to the pool.
func (r *eventReaders) with(ctx context.Context, fn func(conn *zs.Conn) error) error {
	conn, err := r.pool.Take(ctx)
	if err != nil {
		return err
	}
	conn.SetInterrupt(nil)
	defer r.pool.Put(conn)
	err = fn(conn)
	if !conn.AutocommitEnabled() {
		if rerr := execute(conn, "ROLLBACK"); err == nil {
			err = rerr
		}
	}
	return err
}

func (r *eventReaders) close() error { return r.pool.Close() }

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
// returns as an event.
func queryEvents(conn *zs.Conn, query string, args []any, capacity int) (events []eventstore.Event, err error) {
	stmt, err := conn.Prepare(query)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := stmt.Reset(); err == nil && rerr != nil {
			err = rerr
		}
	}()
	if err := bindAll(stmt, args); err != nil {
		return nil, err
	}
	events = make([]eventstore.Event, 0, min(capacity, 64))
	var cols [12]any
	for {
		row, err := stmt.Step()
		if err != nil {
			return nil, err
		}
		if !row {
			return events, nil
		}
		for i := range cols {
			cols[i] = columnValue(stmt, i)
		}
		e, err := decodeEvent(&cols)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
}

// columnValue is column i of the current row as database/sql would give
// it: int64, float64, string, []byte or nil. decodeEvent checks it.
func columnValue(stmt *zs.Stmt, i int) any {
	switch stmt.ColumnType(i) {
	case zs.TypeInteger:
		return stmt.ColumnInt64(i)
	case zs.TypeFloat:
		return stmt.ColumnFloat(i)
	case zs.TypeText:
		return stmt.ColumnText(i)
	case zs.TypeBlob:
		b := make([]byte, stmt.ColumnLen(i))
		stmt.ColumnBytes(i, b)
		return b
	default:
		return nil
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
