package main

import (
	"context"

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
	if err := svc.rm.inTx(ctx, func(ctx context.Context, tx rmTx) error {
		return tx.exec(ctx, boardSchema)
	}); err != nil {
		return nil, err
	}
	handle := func(ctx context.Context, tx rmTx, d codec.Decoded) error {
		var err error
		switch e := d.Value.(type) {
		case domain.OrderPlaced:
			err = tx.exec(ctx, `INSERT INTO sales_board (order_id, customer, status) VALUES (?, ?, 'placed')`, e.OrderID, e.Customer)
		case domain.OrderConfirmed:
			err = tx.exec(ctx, `UPDATE sales_board SET status = 'confirmed' WHERE order_id = ?`, e.OrderID)
		case domain.OrderRejected:
			err = tx.exec(ctx, `UPDATE sales_board SET status = 'rejected', reason = ? WHERE order_id = ?`, e.Reason, e.OrderID)
		}
		return err
	}
	consumer, err := svc.rm.consumer("sales-board", svc.reg, handle, projection.Options{
		Filter:     eventstore.Filter{StreamPrefixes: []string{eventstore.Category(domain.Orders.Name())}},
		Exclusive:  true,
		Logger:     svc.log,
		NoStatsLog: true,
		// With -trace, each batch is a process span linked to the spans
		// that appended its events.
		TracerProvider: svc.tp,
		MeterProvider:  svc.mp,
	})
	if err != nil {
		return nil, err
	}
	return &board{svc: svc, consumer: consumer}, nil
}

// counts reads the board's totals.
func (b *board) counts(ctx context.Context) (boardCounts, error) {
	var c boardCounts
	err := b.svc.rm.inTx(ctx, func(ctx context.Context, tx rmTx) error {
		return tx.each(ctx, `SELECT count(*),
			coalesce(sum(CASE WHEN status = 'confirmed' THEN 1 ELSE 0 END), 0),
			coalesce(sum(CASE WHEN status = 'rejected' THEN 1 ELSE 0 END), 0) FROM sales_board`,
			func(scan func(...any) error) error { return scan(&c.placed, &c.confirmed, &c.rejected) })
	})
	return c, err
}

// open returns the IDs of the orders that have not ended, at most limit.
func (b *board) open(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := b.svc.rm.inTx(ctx, func(ctx context.Context, tx rmTx) error {
		return tx.each(ctx, `SELECT order_id FROM sales_board WHERE status = 'placed' ORDER BY order_id LIMIT ?`,
			func(scan func(...any) error) error {
				var id string
				err := scan(&id)
				ids = append(ids, id)
				return err
			}, limit)
	})
	return ids, err
}
