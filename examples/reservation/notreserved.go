package main

import (
	"context"
	"database/sql"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/examples/reservation/domain"
	"github.com/cairn-es/cairn/projection"
)

// notReserved lists the customers whose seats were not reserved, for the
// box office to call back: a transactional projection of SeatsNotReserved
// in the store's own file.
type notReserved struct {
	svc      *service
	consumer *projection.Consumer
}

// refusal is one order whose seats were not reserved.
type refusal struct {
	OrderID, Customer string
	Seats             int
}

const notReservedSchema = `CREATE TABLE IF NOT EXISTS not_reserved (
	order_id TEXT PRIMARY KEY,
	customer TEXT NOT NULL,
	seats    INTEGER NOT NULL
)`

func newNotReserved(ctx context.Context, svc *service) (*notReserved, error) {
	if err := svc.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, notReservedSchema)
		return err
	}); err != nil {
		return nil, err
	}
	handle := projection.TypedTx(func(ctx context.Context, tx *sql.Tx, e domain.SeatsNotReserved, _ codec.Decoded) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO not_reserved (order_id, customer, seats) VALUES (?, ?, ?)`, e.OrderID, e.Customer, e.Seats)
		return err
	})
	consumer, err := projection.NewTx[*sql.Tx]("not-reserved", svc.store, svc.reg, svc.store, handle, projection.Options{
		Filter:     eventstore.Filter{StreamPrefixes: []string{eventstore.Category(domain.Reservations.Name())}},
		Exclusive:  true,
		Logger:     svc.log,
		NoStatsLog: true,
	})
	if err != nil {
		return nil, err
	}
	return &notReserved{svc: svc, consumer: consumer}, nil
}

// list returns the orders whose seats were not reserved, by customer.
func (n *notReserved) list(ctx context.Context) ([]refusal, error) {
	var out []refusal
	err := n.svc.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT order_id, customer, seats FROM not_reserved ORDER BY customer, order_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r refusal
			if err := rows.Scan(&r.OrderID, &r.Customer, &r.Seats); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}
