package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

func TestTxCommitsEverythingOrNothing(t *testing.T) {
	ctx := context.Background()
	c := memory.New()
	d, err := c.ParkDeadLetter(ctx, eventstore.DeadLetter{Consumer: "p",
		Event: eventstore.Event{EventData: eventstore.EventData{ID: eventstore.NewEventID(), Type: "t"}, StreamID: "s-1", Position: eventstore.Position{Major: 1}}})
	require.NoError(t, err)

	// A failing function keeps nothing of its writes, moves or deletions.
	boom := errors.New("boom")
	err = c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		tx.Put("k", []byte("v"))
		v, ok := tx.Get("k")
		assert.True(t, ok, "a transaction reads its own writes")
		assert.Equal(t, "v", string(v))
		require.NoError(t, c.SaveCheckpointTx(ctx, tx, "p", eventstore.Start, eventstore.Position{Major: 5}, 1))
		require.NoError(t, c.DeleteDeadLetterTx(ctx, tx, "p", d.ID))
		_, ok = c.Value("k")
		assert.False(t, ok, "an uncommitted write is visible outside")
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, ok := c.Value("k")
	assert.False(t, ok)
	cp, err := c.Checkpoint(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, storekit.Checkpoint{}, cp)
	_, err = c.DeadLetter(ctx, "p", d.ID)
	require.NoError(t, err)

	// A checkpoint that moved before the commit fails the whole commit.
	err = c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		tx.Put("k", []byte("v"))
		require.NoError(t, c.SaveCheckpointTx(ctx, tx, "p", eventstore.Start, eventstore.Position{Major: 5}, 1))
		require.NoError(t, c.SaveCheckpoint(ctx, "p", eventstore.Start, eventstore.Position{Major: 2}, 2))
		return nil
	})
	require.ErrorIs(t, err, eventstore.ErrFenced)
	_, ok = c.Value("k")
	assert.False(t, ok)

	// A successful commit applies everything.
	require.NoError(t, c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		tx.Put("k", []byte("v"))
		tx.Put("gone", []byte("x"))
		tx.Delete("gone")
		require.NoError(t, c.SaveCheckpointTx(ctx, tx, "p", eventstore.Position{Major: 2}, eventstore.Position{Major: 9}, 2))
		return c.DeleteDeadLetterTx(ctx, tx, "p", d.ID)
	}))
	v, ok := c.Value("k")
	assert.True(t, ok)
	assert.Equal(t, "v", string(v))
	_, ok = c.Value("gone")
	assert.False(t, ok)
	cp, err = c.Checkpoint(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, storekit.Checkpoint{Position: eventstore.Position{Major: 9}, Fence: 2}, cp)
	_, err = c.DeadLetter(ctx, "p", d.ID)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
}

// TestTxLocksTheCheckpointItMoves: a transaction that moves a checkpoint
// holds it until it ends, so a second one that claims the same checkpoint
// waits and then fails at once, before it does any work, as it would on
// PostgreSQL; a rollback frees the checkpoint for the next transaction.
func TestTxLocksTheCheckpointItMoves(t *testing.T) {
	ctx := context.Background()
	c := memory.New()
	one := eventstore.Position{Major: 1}
	claimed, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
			if err := c.SaveCheckpointTx(ctx, tx, "p", eventstore.Start, one, 0); err != nil {
				return err
			}
			close(claimed)
			<-release
			return nil
		})
	}()
	<-claimed
	second := make(chan error, 1)
	go func() {
		second <- c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
			return c.SaveCheckpointTx(ctx, tx, "p", eventstore.Start, one, 0)
		})
	}()
	select {
	case err := <-second:
		t.Fatalf("the second transaction did not wait for the first: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-first)
	assert.ErrorIs(t, <-second, eventstore.ErrCheckpointMoved, "it sees the first one's move")

	// A rolled-back transaction frees the lock too.
	boom := errors.New("boom")
	require.ErrorIs(t, c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		require.NoError(t, c.SaveCheckpointTx(ctx, tx, "p", one, eventstore.Position{Major: 2}, 0))
		return boom
	}), boom)
	require.NoError(t, c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
		return c.SaveCheckpointTx(ctx, tx, "p", one, eventstore.Position{Major: 2}, 0)
	}))

	// A transaction waiting for the lock gives up with its context.
	held := make(chan struct{})
	done := make(chan struct{})
	go func() {
		_ = c.InTx(ctx, func(ctx context.Context, tx *memory.Tx) error {
			require.NoError(t, c.SaveCheckpointTx(ctx, tx, "q", eventstore.Start, one, 0))
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := c.InTx(short, func(ctx context.Context, tx *memory.Tx) error {
		return c.SaveCheckpointTx(ctx, tx, "q", eventstore.Start, one, 0)
	})
	close(done)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
