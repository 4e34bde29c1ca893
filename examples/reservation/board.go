package main

import (
	"context"
	"database/sql"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/projection"
)

// board is the sales board: each order and where it stands, kept by a
// transactional projection in the store's own file. The progress line
// reads it, and the run waits on it for every order to end.
type board struct {
	svc      *service
	consumer *projection.Consumer
}

type boardCounts struct {
	placed, confirmed, rejected int
}

const boardSchema = `CREATE TABLE IF NOT EXISTS sales_board (
	order_id TEXT PRIMARY KEY,
	customer TEXT NOT NULL,
	status   TEXT NOT NULL,
	reason   TEXT NOT NULL DEFAULT ''
)`

func newBoard(ctx context.Context, svc *service) (*board, error) {
	if err := svc.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, boardSchema)
		return err
	}); err != nil {
		return nil, err
	}
	handle := func(ctx context.Context, tx *sql.Tx, d codec.Decoded) error {
		var err error
		switch e := d.Value.(type) {
		case domain.OrderPlaced:
			_, err = tx.ExecContext(ctx, `INSERT INTO sales_board (order_id, customer, status) VALUES (?, ?, 'placed')`, e.OrderID, e.Customer)
		case domain.OrderConfirmed:
			_, err = tx.ExecContext(ctx, `UPDATE sales_board SET status = 'confirmed' WHERE order_id = ?`, e.OrderID)
		case domain.OrderRejected:
			_, err = tx.ExecContext(ctx, `UPDATE sales_board SET status = 'rejected', reason = ? WHERE order_id = ?`, e.Reason, e.OrderID)
		}
		return err
	}
	consumer, err := projection.NewTx[*sql.Tx]("sales-board", svc.store, svc.reg, svc.store, handle, projection.Options{
		Filter:     eventstore.Filter{StreamPrefixes: []string{eventstore.Category(domain.Orders.Name())}},
		Exclusive:  true,
		Logger:     svc.log,
		NoStatsLog: true,
	})
	if err != nil {
		return nil, err
	}
	return &board{svc: svc, consumer: consumer}, nil
}

// counts reads the board's totals.
func (b *board) counts(ctx context.Context) (boardCounts, error) {
	var c boardCounts
	err := b.svc.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*),
			coalesce(sum(status = 'confirmed'), 0), coalesce(sum(status = 'rejected'), 0) FROM sales_board`).
			Scan(&c.placed, &c.confirmed, &c.rejected)
	})
	return c, err
}

// open returns the IDs of the orders that have not ended, at most limit.
func (b *board) open(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := b.svc.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT order_id FROM sales_board WHERE status = 'placed' ORDER BY order_id LIMIT ?`, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	return ids, err
}
