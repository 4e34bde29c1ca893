package main

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
)

// totals is a read model in the store's own SQLite file, kept by a
// transactional projection: each batch of events and the checkpoint commit
// together, so a crash can never count an event twice or lose one.
type totals struct {
	store    *sqlite.Store
	consumer *projection.Consumer
}

type totalsRow struct {
	placed, paid, shipped int
	revenueCents          int64
}

const totalsSchema = `CREATE TABLE IF NOT EXISTS order_totals (
	id            INTEGER PRIMARY KEY CHECK (id = 1),
	placed        INTEGER NOT NULL,
	paid          INTEGER NOT NULL,
	shipped       INTEGER NOT NULL,
	revenue_cents INTEGER NOT NULL
);
INSERT INTO order_totals VALUES (1, 0, 0, 0, 0) ON CONFLICT DO NOTHING;`

func newTotals(ctx context.Context, store *sqlite.Store, reg *codec.Registry, logger *slog.Logger) (*totals, error) {
	err := store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, totalsSchema)
		return err
	})
	if err != nil {
		return nil, err
	}
	bump := func(column string) func(ctx context.Context, tx *sql.Tx, cents int64) error {
		query := "UPDATE order_totals SET " + column + " = " + column + " + 1, revenue_cents = revenue_cents + ?"
		return func(ctx context.Context, tx *sql.Tx, cents int64) error {
			_, err := tx.ExecContext(ctx, query, cents)
			return err
		}
	}
	placed, paid, shipped := bump("placed"), bump("paid"), bump("shipped")
	handle := func(ctx context.Context, tx *sql.Tx, d codec.Decoded) error {
		switch e := d.Value.(type) {
		case OrderPlaced:
			return placed(ctx, tx, 0)
		case OrderPaid:
			return paid(ctx, tx, e.AmountCents)
		case OrderShipped:
			return shipped(ctx, tx, 0)
		}
		return nil
	}
	consumer, err := projection.NewTx[*sql.Tx]("order-totals", store, reg, store, handle, projection.Options{
		Filter:     eventstore.Filter{StreamPrefixes: []string{eventstore.Category("order")}},
		Exclusive:  true,
		Logger:     logger,
		NoStatsLog: true,
	})
	if err != nil {
		return nil, err
	}
	return &totals{store: store, consumer: consumer}, nil
}

func (t *totals) read(ctx context.Context) (totalsRow, error) {
	var r totalsRow
	err := t.store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT placed, paid, shipped, revenue_cents FROM order_totals WHERE id = 1").
			Scan(&r.placed, &r.paid, &r.shipped, &r.revenueCents)
	})
	return r, err
}
