package flowtest

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/projection"
)

// ReadModelName is the name of the read model's consumer.
const ReadModelName = "flowtest-read-model"

// EventTypes are the stored type names of the events of the flow's
// aggregates: what the read model counts. (A payment stream may also hold
// a recorded rejection, which is Cairn's, not the flow's.)
var EventTypes = []string{"order.placed", "order.confirmed", "order.rejected", "seats.reserved", "seats.not-reserved",
	"seats.cancelled", "rig-payment.accepted", "rig-payment.pending"}

// NewReadModel returns the read model's consumer on s, a SQLite or
// PostgreSQL store: a transactional projection that adds one to the row of
// each event it handles, in the transaction that moves its checkpoint. A
// row above one is an event counted twice. opts.Filter is set to the
// flow's event types; h, when set, runs first in each event's
// transaction (a test's hook).
func NewReadModel(ctx context.Context, s eventstore.Store, reg *codec.Registry, opts projection.Options) (*projection.Consumer, error) {
	return NewReadModelHooked(ctx, s, reg, opts, nil)
}

// NewReadModelHooked is [NewReadModel] with hook called for each event
// inside its transaction, before the row is written: a test slows the
// handler down with it.
func NewReadModelHooked(ctx context.Context, s eventstore.Store, reg *codec.Registry, opts projection.Options, hook func(ctx context.Context, d codec.Decoded) error) (*projection.Consumer, error) {
	opts.Filter = eventstore.Filter{Types: EventTypes}
	if hook == nil {
		hook = func(context.Context, codec.Decoded) error { return nil }
	}
	table := qualified(s)
	const create = ` (event_id TEXT PRIMARY KEY, stream TEXT NOT NULL, n INTEGER NOT NULL)`
	const upsert = ` (event_id, stream, n) VALUES ($1, $2, 1) ON CONFLICT (event_id) DO UPDATE SET n = c.n + 1`
	switch st := s.(type) {
	case *sqlite.Store:
		if err := st.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+create)
			return err
		}); err != nil {
			return nil, err
		}
		return projection.NewTx(ReadModelName, s, reg, st, func(ctx context.Context, tx *sql.Tx, d codec.Decoded) error {
			if err := hook(ctx, d); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` AS c`+upsert, d.Event.ID.String(), d.Event.StreamID)
			return err
		}, opts)
	case *postgres.Store:
		if _, err := st.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+create); err != nil {
			return nil, err
		}
		return projection.NewTx(ReadModelName, s, reg, st, func(ctx context.Context, tx pgx.Tx, d codec.Decoded) error {
			if err := hook(ctx, d); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` AS c`+upsert, d.Event.ID.String(), d.Event.StreamID)
			return err
		}, opts)
	}
	return nil, fmt.Errorf("%w: flowtest: the read model needs a SQLite or PostgreSQL store, not %T", eventstore.ErrInvalidArgument, s)
}

// ReadModelCounts returns how many times the read model counted each
// event, by event ID.
func ReadModelCounts(ctx context.Context, s eventstore.Store) (map[string]int, error) {
	counts := make(map[string]int)
	q := `SELECT event_id, n FROM ` + qualified(s)
	switch st := s.(type) {
	case *sqlite.Store:
		err := st.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, q)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				var n int
				if err := rows.Scan(&id, &n); err != nil {
					return err
				}
				counts[id] = n
			}
			return rows.Err()
		})
		return counts, err
	case *postgres.Store:
		rows, err := st.Pool().Query(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return nil, err
			}
			counts[id] = n
		}
		return counts, rows.Err()
	}
	return nil, fmt.Errorf("%w: flowtest: no read model in a %T", eventstore.ErrInvalidArgument, s)
}
