package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// newReadModel opens a store with a table of its own in the store's file.
func newReadModel(t *testing.T) *sqlite.Store {
	s := openTemp(t, sqlite.Options{})
	require.NoError(t, s.InTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
		return err
	}))
	return s
}

func add(ctx context.Context, tx *sql.Tx, key string, delta int) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO counters (key, n) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET n = n + excluded.n`, key, delta)
	return err
}

func counter(t *testing.T, s *sqlite.Store, key string) int {
	var n int
	require.NoError(t, s.InTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT n FROM counters WHERE key = ?`, key).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			n = 0
			return nil
		}
		return err
	}))
	return n
}

type handlerError struct{ n int }

func (e *handlerError) Error() string { return "handler failed" }

// A read-model change and a checkpoint commit together, or neither does;
// fn's error comes back as it was.
func TestInTxCommitsReadModelWithCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := newReadModel(t)
	p1 := eventstore.Position{Major: 1}
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		require.NoError(t, add(ctx, tx, "a", 1))
		return s.SaveCheckpointTx(ctx, tx, "proj", eventstore.Position{}, p1, 0)
	}))
	assert.Equal(t, 1, counter(t, s, "a"))
	cp, err := s.Checkpoint(ctx, "proj")
	require.NoError(t, err)
	assert.Equal(t, p1, cp.Position)

	err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		require.NoError(t, add(ctx, tx, "a", 10))
		require.NoError(t, s.SaveCheckpointTx(ctx, tx, "proj", p1, eventstore.Position{Major: 2}, 0))
		return &handlerError{n: 7}
	})
	var he *handlerError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, 7, he.n, "fn's error is returned as it is")
	assert.Equal(t, 1, counter(t, s, "a"), "a failed fn keeps nothing")
	cp, err = s.Checkpoint(ctx, "proj")
	require.NoError(t, err)
	assert.Equal(t, p1, cp.Position)

	// A stale save inside the transaction fails it, and the read model's
	// change with it.
	err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		require.NoError(t, add(ctx, tx, "a", 100))
		return s.SaveCheckpointTx(ctx, tx, "proj", eventstore.Position{}, p1, 0)
	})
	require.ErrorIs(t, err, eventstore.ErrCheckpointMoved)
	assert.Equal(t, 1, counter(t, s, "a"))
}

func TestInTxPanicRollsBackAndPanics(t *testing.T) {
	ctx := context.Background()
	s := newReadModel(t)
	assert.PanicsWithValue(t, "boom", func() {
		_ = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			require.NoError(t, add(ctx, tx, "a", 1))
			panic("boom")
		})
	})
	assert.Equal(t, 0, counter(t, s, "a"))
	// The writer is free again.
	_, err := s.Append(ctx, "order-1", eventstore.NoStream, event("x"))
	require.NoError(t, err)
}

// Writes of the store called with fn's context would wait for fn: they
// fail at once instead.
func TestInTxRefusesNestedWrites(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, sqlite.Options{})
	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.Append(ctx, "order-1", eventstore.NoStream, event("x"))
		assert.ErrorIs(t, err, sqlite.ErrInTx)
		assert.ErrorIs(t, s.SaveCheckpoint(ctx, "c", eventstore.Position{}, eventstore.Position{Major: 1}, 0), sqlite.ErrInTx)
		_, _, err = s.AcquireLease(ctx, "c", "me", 1e9)
		assert.ErrorIs(t, err, sqlite.ErrInTx)
		assert.ErrorIs(t, s.InTx(ctx, func(context.Context, *sql.Tx) error { return nil }), sqlite.ErrInTx)
		return nil
	})
	require.NoError(t, err)
	got, _, err := s.AcquireLease(ctx, "c", "me", 1e9)
	require.NoError(t, err)
	assert.Equal(t, storekit.Fence(1), got.Fence, "nothing was written by the refused calls")
}

// Events appended in fn commit with it, wake subscribers then, and are
// gone when fn fails.
func TestAppendTx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openTemp(t, sqlite.Options{NoPolling: true})
	sub := s.Subscribe(ctx, eventstore.Position{}, eventstore.Filter{})
	next, stop := iterPull(sub)
	defer stop()

	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.AppendTx(ctx, tx, "order-1", eventstore.NoStream, event("lost"))
		require.NoError(t, err)
		return errors.New("no")
	})
	require.EqualError(t, err, "no")

	var res eventstore.AppendResult
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = s.AppendTx(ctx, tx, "order-1", eventstore.NoStream, event("kept"), event("kept"))
		if err != nil {
			return err
		}
		// A failed append leaves the transaction usable.
		_, err = s.AppendTx(ctx, tx, "order-1", eventstore.NoStream, event("conflict"))
		require.ErrorIs(t, err, eventstore.ErrWrongVersion)
		return nil
	}))
	assert.Equal(t, uint64(1), res.LastVersion)

	// Polling is off: only the commit's wake-up delivers these.
	for i := range 2 {
		e, err, ok := next()
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, "kept", e.Type)
		assert.Equal(t, uint64(i), e.Version)
	}

	// A transaction that is not the running InTx's is refused.
	var stale *sql.Tx
	require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { stale = tx; return nil }))
	_, err = s.AppendTx(ctx, stale, "order-2", eventstore.NoStream, event("x"))
	require.Error(t, err)
}

// Appends wait while fn runs, and all complete.
func TestInTxAndAppendsTakeTurns(t *testing.T) {
	ctx := context.Background()
	s := newReadModel(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.Append(ctx, "s-"+string(rune('a'+i)), eventstore.Any, event("x"))
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			assert.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return add(ctx, tx, "n", 1) }))
		}()
	}
	wg.Wait()
	assert.Equal(t, 8, counter(t, s, "n"))
	n := 0
	for _, err := range s.ReadAll(ctx, eventstore.Position{}, eventstore.Filter{}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 8, n)
}

func TestInTxAfterCloseAndCanceled(t *testing.T) {
	s := openTemp(t, sqlite.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := s.InTx(ctx, func(context.Context, *sql.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	err = s.InTx(context.Background(), func(context.Context, *sql.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, eventstore.ErrClosed)
	assert.False(t, ran)
}

func iterPull(seq iter.Seq2[eventstore.Event, error]) (func() (eventstore.Event, error, bool), func()) {
	return iter.Pull2(seq)
}

// A statement of fn interrupted by its context fails fn; the transaction
// rolls back and the writer goes on.
func TestInTxCanceledInsideFn(t *testing.T) {
	s := newReadModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := add(ctx, tx, "a", 1); err != nil {
			return err
		}
		cancel()
		return add(ctx, tx, "a", 1)
	})
	require.Error(t, err)
	assert.Equal(t, 0, counter(t, s, "a"))
	_, err = s.Append(context.Background(), "order-1", eventstore.NoStream, event("x"))
	require.NoError(t, err)
}
