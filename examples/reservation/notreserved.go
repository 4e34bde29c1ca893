package main

import (
	"cmp"
	"context"
	"slices"
	"strings"

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
	if err := svc.rm.inTx(ctx, func(ctx context.Context, tx rmTx) error {
		return tx.exec(ctx, notReservedSchema)
	}); err != nil {
		return nil, err
	}
	handle := func(ctx context.Context, tx rmTx, d codec.Decoded) error {
		e, ok := d.Value.(domain.SeatsNotReserved)
		if !ok {
			return nil
		}
		return tx.exec(ctx, `INSERT INTO not_reserved (order_id, customer, seats) VALUES (?, ?, ?)`, e.OrderID, e.Customer, e.Seats)
	}
	consumer, err := svc.rm.consumer("not-reserved", svc.reg, handle, projection.Options{
		Filter:     eventstore.Filter{StreamPrefixes: []string{eventstore.Category(domain.Reservations.Name())}},
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
	return &notReserved{svc: svc, consumer: consumer}, nil
}

// list returns the orders whose seats were not reserved, by customer.
func (n *notReserved) list(ctx context.Context) ([]refusal, error) {
	var out []refusal
	err := n.svc.rm.inTx(ctx, func(ctx context.Context, tx rmTx) error {
		return tx.each(ctx, `SELECT order_id, customer, seats FROM not_reserved ORDER BY customer, order_id`,
			func(scan func(...any) error) error {
				var r refusal
				err := scan(&r.OrderID, &r.Customer, &r.Seats)
				out = append(out, r)
				return err
			})
	})
	// Sorted here, not by ORDER BY, whose text order is the database's
	// collation: byte order on SQLite, the locale's on PostgreSQL.
	slices.SortFunc(out, func(a, b refusal) int {
		return cmp.Or(strings.Compare(a.Customer, b.Customer), strings.Compare(a.OrderID, b.OrderID))
	})
	return out, err
}
