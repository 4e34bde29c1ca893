package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/postgres"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// readModel makes a table of counters in the store's schema, as a
// transactional projection's read model would be.
func readModel(t *testing.T, s *postgres.Store) (add func(ctx context.Context, tx pgx.Tx, key string, n int64) error, get func(key string) int64) {
	t.Helper()
	table := pgx.Identifier{s.Schema(), "totals"}.Sanitize()
	_, err := s.Pool().Exec(context.Background(), `CREATE TABLE `+table+` (key text PRIMARY KEY, n bigint NOT NULL)`)
	require.NoError(t, err)
	add = func(ctx context.Context, tx pgx.Tx, key string, n int64) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` AS t (key, n) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET n = t.n + excluded.n`, key, n)
		return err
	}
	get = func(key string) int64 {
		var n int64
		err := s.Pool().QueryRow(context.Background(), `SELECT coalesce((SELECT n FROM `+table+` WHERE key = $1), 0)`, key).Scan(&n)
		require.NoError(t, err)
		return n
	}
	return add, get
}

type handlerError struct{ n int }

func (e *handlerError) Error() string { return "handler failed" }

func TestInTxCommitsReadModelAndCheckpointTogether(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	add, get := readModel(t, s)
	p1, p2 := eventstore.Position{Major: 10, Minor: 1}, eventstore.Position{Major: 20, Minor: 1}

	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, add(ctx, tx, "total", 3))
		require.NoError(t, s.SaveCheckpointTx(ctx, tx, "totals", eventstore.Start, p1, 2))
		// Not visible outside the transaction before it commits.
		cp, err := s.Checkpoint(ctx, "totals")
		require.NoError(t, err)
		assert.Equal(t, storekit.Checkpoint{}, cp)
		return nil
	}))
	assert.Equal(t, int64(3), get("total"))
	cp, err := s.Checkpoint(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, storekit.Checkpoint{Position: p1, Fence: 2}, cp)

	// fn fails after writing: its error comes back as it is, nothing stays.
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, add(ctx, tx, "total", 5))
		require.NoError(t, s.SaveCheckpointTx(ctx, tx, "totals", p1, p2, 2))
		return &handlerError{n: 7}
	})
	var he *handlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 7, he.n)
	assert.Equal(t, int64(3), get("total"))
	cp, err = s.Checkpoint(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, p1, cp.Position)

	// A stale fence fails inside the transaction; the consumer returns the
	// conflict, and the read-model write goes with the rollback.
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, add(ctx, tx, "total", 5))
		return s.SaveCheckpointTx(ctx, tx, "totals", p1, p2, 1)
	})
	require.ErrorIs(t, err, eventstore.ErrFenced)
	assert.Equal(t, int64(3), get("total"))
}

func TestInTxRacingBatchesOneCommits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	add, get := readModel(t, s)
	start := eventstore.Position{Major: 5, Minor: 0}
	require.NoError(t, s.SaveCheckpoint(ctx, "race", eventstore.Start, start, 0))

	// Eight batches of the same events from the same checkpoint, as
	// consumers running without a lease would apply them: the checkpoint's
	// row lock makes the later ones wait, then fail; the read model counts
	// the batch once.
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				if err := add(ctx, tx, "total", 10); err != nil {
					return err
				}
				return s.SaveCheckpointTx(ctx, tx, "race", start, eventstore.Position{Major: 6, Minor: uint64(i)}, 0)
			})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, eventstore.ErrCheckpointMoved, "racer %d", i)
	}
	assert.Equal(t, 1, won)
	assert.Equal(t, int64(10), get("total"))
}

func TestDeleteDeadLetterTx(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	add, get := readModel(t, s)
	d, err := s.ParkDeadLetter(ctx, eventstore.DeadLetter{
		Consumer: "totals", Error: "boom", Attempts: 3,
		FirstFailure: time.Now().UTC(), LastFailure: time.Now().UTC(),
		Event: eventstore.Event{EventData: eventstore.EventData{ID: uuid.New(), Type: "t", SchemaVersion: 1, Data: []byte("{}")},
			StreamID: "order-1", Position: eventstore.Position{Major: 3, Minor: 1}},
	})
	require.NoError(t, err)

	// Retried into the read model, but the transaction fails: the dead
	// letter stays.
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, add(ctx, tx, "total", 1))
		require.NoError(t, s.DeleteDeadLetterTx(ctx, tx, "totals", d.ID))
		return errors.New("commit refused")
	})
	require.EqualError(t, err, "commit refused")
	n, err := s.CountDeadLetters(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, add(ctx, tx, "total", 1))
		return s.DeleteDeadLetterTx(ctx, tx, "totals", d.ID)
	}))
	n, err = s.CountDeadLetters(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(1), get("total"))

	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		return s.DeleteDeadLetterTx(ctx, tx, "totals", d.ID)
	})
	var nf *storekit.DeadLetterNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, d.ID, nf.ID)
}

// TestInTxAppends shows that a projection can emit events in the same
// transaction as its read model and checkpoint.
func TestInTxAppends(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, postgres.Options{})
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := s.AppendTx(ctx, tx, "report-1", eventstore.NoStream,
			eventstore.EventData{Type: "report.updated", SchemaVersion: 1, Data: []byte("{}")}); err != nil {
			return err
		}
		return s.SaveCheckpointTx(ctx, tx, "reports", eventstore.Start, eventstore.Position{Major: 1, Minor: 1}, 0)
	}))
	s.Notify()
	n := 0
	for _, err := range s.ReadStream(ctx, "report-1", eventstore.ReadOptions{}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 1, n)
}

// TestInTxPanicRollsBack checks that a handler's panic leaves no
// transaction open on a pooled connection: the pool of one connection
// serves the next transaction.
func TestInTxPanicRollsBack(t *testing.T) {
	ctx := context.Background()
	s := newStoreAt(t, withPoolSize(server.URL, 1), postgres.Options{})
	add, get := readModel(t, s)
	require.Panics(t, func() {
		_ = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			require.NoError(t, add(ctx, tx, "total", 1))
			panic("handler bug")
		})
	})
	// Without the rollback, the only connection would stay in the dead
	// transaction and this one would wait forever; the limit only turns a
	// hang into a failure.
	guard, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.InTx(guard, func(ctx context.Context, tx pgx.Tx) error {
		return add(ctx, tx, "total", 2)
	}))
	assert.Equal(t, int64(2), get("total"))
}
