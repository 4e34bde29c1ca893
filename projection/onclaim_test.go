package projection_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/internal/batchconsumer"
	"github.com/cairn-es/cairn/projection"
)

// TestOnClaimRunsOnceTheCheckpointIsHeld: OnClaim is called at the start
// of each session, holding the lease, with the checkpoint the session
// resumes after and a context that ends with the session; an error from
// it ends the session before any event is handled.
func TestOnClaimRunsOnceTheCheckpointIsHeld(t *testing.T) {
	ctx := context.Background()
	events := memory.New()
	t.Cleanup(func() { _ = events.Close() })
	consumers := memory.New()
	appendOne := func() {
		_, err := events.Append(ctx, "s-1", eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "t", SchemaVersion: 1, Data: []byte("{}")})
		require.NoError(t, err)
	}
	appendOne()
	appendOne()

	var handled atomic.Int64
	var c *projection.Consumer
	var froms []eventstore.Position
	var leader []bool
	var sessions []context.Context
	fail := error(nil)
	opts := projection.Options{Leases: consumers, Logger: discard(), NoStatsLog: true}
	onClaim := func(ctx context.Context, from eventstore.Position) error {
		st, err := c.Stats(ctx)
		require.NoError(t, err)
		froms, leader, sessions = append(froms, from), append(leader, st.Leader), append(sessions, ctx)
		return fail
	}
	c, err := batchconsumer.New[*projection.Consumer]("claims", events, consumers, func(_ context.Context, evs []eventstore.Event) error {
		handled.Add(int64(len(evs)))
		return nil
	}, onClaim, opts)
	require.NoError(t, err)

	require.NoError(t, c.CatchUp(ctx))
	require.Len(t, froms, 1)
	assert.Equal(t, eventstore.Start, froms[0], "the first session resumes from the start")
	assert.True(t, leader[0], "OnClaim runs holding the lease")
	assert.Error(t, sessions[0].Err(), "its context ends with the session")
	assert.EqualValues(t, 2, handled.Load())
	cp, err := consumers.Checkpoint(ctx, "claims")
	require.NoError(t, err)

	appendOne()
	fail = errors.New("cannot reload")
	err = c.CatchUp(ctx)
	require.ErrorIs(t, err, fail)
	assert.Contains(t, err.Error(), `consumer "claims"`)
	require.Len(t, froms, 2)
	assert.Equal(t, cp.Position, froms[1], "the next session resumes after the stored checkpoint")
	assert.EqualValues(t, 2, handled.Load(), "a failing OnClaim handles nothing")
}
