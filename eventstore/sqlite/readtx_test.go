package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
)

// Read models in the store's file are queried in a read-only transaction
// that runs beside the writer.
func ExampleStore_ReadTx() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	err = store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE order_totals (customer TEXT PRIMARY KEY, total INTEGER NOT NULL) STRICT;
			INSERT INTO order_totals VALUES ('ada', 1250)`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	var total int
	err = store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT total FROM order_totals WHERE customer = ?`, "ada").Scan(&total)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ada:", total)
	// Output:
	// ada: 1250
}

func TestReadTxSeesOneSnapshotBesideTheWriterAndCannotWrite(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE n (v INTEGER NOT NULL); INSERT INTO n VALUES (1)`)
		return err
	}))

	count := func(tx *sql.Tx) int {
		var n int
		require.NoError(t, tx.QueryRowContext(ctx, `SELECT count(*) FROM n`).Scan(&n))
		return n
	}
	err = store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		assert.Equal(t, 1, count(tx))
		// The writer commits while this read is open: it does not wait, and
		// the read keeps its snapshot.
		require.NoError(t, store.InTx(ctx, func(ctx context.Context, w *sql.Tx) error {
			_, err := w.ExecContext(ctx, `INSERT INTO n VALUES (2)`)
			return err
		}))
		_, err := store.Append(ctx, "s-1", eventstore.NoStream, eventstore.EventData{Type: "x", SchemaVersion: 1, Data: []byte(`{}`)})
		require.NoError(t, err)
		assert.Equal(t, 1, count(tx), "one snapshot for the whole transaction")
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		assert.Equal(t, 2, count(tx), "a new transaction sees the commit")
		return nil
	}))

	err = store.ReadTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO n VALUES (3)`)
		return err
	})
	require.Error(t, err, "a write through a read transaction fails")

	mine := errors.New("mine")
	assert.Same(t, mine, store.ReadTx(ctx, func(context.Context, *sql.Tx) error { return mine }), "fn's error as it is")
	require.NoError(t, store.Close())
	assert.ErrorIs(t, store.ReadTx(ctx, func(context.Context, *sql.Tx) error { return nil }), eventstore.ErrClosed)
}
