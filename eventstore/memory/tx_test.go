package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func TestTxCommitsEverythingOrNothing(t *testing.T) {
	ctx := context.Background()
	c := memory.NewConsumers()
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
	assert.Equal(t, eventstore.Checkpoint{}, cp)
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
	assert.Equal(t, eventstore.Checkpoint{Position: eventstore.Position{Major: 9}, Fence: 2}, cp)
	_, err = c.DeadLetter(ctx, "p", d.ID)
	require.ErrorIs(t, err, eventstore.ErrDeadLetterNotFound)
}
