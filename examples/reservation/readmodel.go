package main

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/cli"
	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
)

// The read models live in the store's own database, in transactions that
// also move their consumers' checkpoints, on SQLite (*sql.Tx) or
// PostgreSQL (pgx.Tx). rmTx is the little of a transaction they use, so
// that their SQL is written once: with ? placeholders, which pgTx numbers.
type rmTx interface {
	exec(ctx context.Context, query string, args ...any) error
	// each runs query and calls row with the Scan of each row.
	each(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error
}

// readModels are the transactions and transactional consumers of the
// store the service opened.
type readModels interface {
	inTx(ctx context.Context, fn func(ctx context.Context, tx rmTx) error) error
	consumer(name string, reg *codec.Registry, h func(ctx context.Context, tx rmTx, d codec.Decoded) error, opts projection.Options) (*projection.Consumer, error)
	// mount gives the command line consumer c, whose read model is table:
	// a rebuild empties the table in the transaction that moves c's
	// checkpoint back.
	mount(c *projection.Consumer, table string) cli.ProjectionConsumer
}

// readModelsOf returns the read models of store, or nil for a store that
// keeps none (one without SQL transactions).
func readModelsOf(store eventstore.Store) readModels {
	switch s := store.(type) {
	case *sqlite.Store:
		return sqliteModels{s}
	case *postgres.Store:
		return pgModels{s}
	}
	return nil
}

type sqliteModels struct{ s *sqlite.Store }

func (m sqliteModels) inTx(ctx context.Context, fn func(ctx context.Context, tx rmTx) error) error {
	return m.s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlTx{tx}) })
}

func (m sqliteModels) consumer(name string, reg *codec.Registry, h func(ctx context.Context, tx rmTx, d codec.Decoded) error, opts projection.Options) (*projection.Consumer, error) {
	return projection.NewTx[*sql.Tx](name, m.s, reg, m.s, func(ctx context.Context, tx *sql.Tx, d codec.Decoded) error {
		return h(ctx, sqlTx{tx}, d)
	}, opts)
}

func (m sqliteModels) mount(c *projection.Consumer, table string) cli.ProjectionConsumer {
	return cli.TxProjection(c, func(ctx context.Context, tx *sql.Tx) error { return sqlTx{tx}.exec(ctx, emptyTable(table)) })
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) exec(ctx context.Context, query string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, query, args...)
	return err
}

func (t sqlTx) each(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error {
	rows, err := t.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return eachRow(rows, row)
}

type pgModels struct{ s *postgres.Store }

func (m pgModels) inTx(ctx context.Context, fn func(ctx context.Context, tx rmTx) error) error {
	return m.s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgTx{tx}) })
}

func (m pgModels) consumer(name string, reg *codec.Registry, h func(ctx context.Context, tx rmTx, d codec.Decoded) error, opts projection.Options) (*projection.Consumer, error) {
	return projection.NewTx[pgx.Tx](name, m.s, reg, m.s, func(ctx context.Context, tx pgx.Tx, d codec.Decoded) error {
		return h(ctx, pgTx{tx}, d)
	}, opts)
}

func (m pgModels) mount(c *projection.Consumer, table string) cli.ProjectionConsumer {
	return cli.TxProjection(c, func(ctx context.Context, tx pgx.Tx) error { return pgTx{tx}.exec(ctx, emptyTable(table)) })
}

// emptyTable is the statement that empties a read model's table (one of
// the example's own names, never input).
func emptyTable(table string) string { return "DELETE FROM " + table }

type pgTx struct{ tx pgx.Tx }

func (t pgTx) exec(ctx context.Context, query string, args ...any) error {
	_, err := t.tx.Exec(ctx, numbered(query), args...)
	return err
}

func (t pgTx) each(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error {
	rows, err := t.tx.Query(ctx, numbered(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return eachRow(rows, row)
}

// eachRow calls row with the Scan of each of rows, database/sql's or
// pgx's.
func eachRow(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, row func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// numbered turns the ? placeholders of query into PostgreSQL's $1, $2...
// (the read models' SQL has no ? in its literals).
func numbered(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
