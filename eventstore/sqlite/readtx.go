package sqlite

import (
	"context"
	"database/sql"
)

// ReadTx runs fn in a read-only transaction on one of the store's reader
// connections: the way to query read models kept in the store's file. fn
// sees one consistent snapshot of the file, taken when it first reads,
// and runs beside the writer and other readers (the file is in WAL mode),
// so it never waits for appends or projections, nor they for it. A write
// through tx fails ("attempt to write a readonly database"); write read
// models in a transactional projection instead (see [Store.InTx]).
//
// fn's error is returned as it is. To see a command's effect, first wait
// for the projection to pass the command's position
// (projection.Consumer.WaitFor).
func (s *Store) ReadTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := s.readable(ctx); err != nil {
		return err
	}
	tx, err := s.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.readErr(ctx, err, "begin a read transaction")
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback() // a read-only transaction has nothing to undo
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.readErr(ctx, err, "end a read transaction")
	}
	return nil
}
