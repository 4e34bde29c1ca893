package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every message takes effect once, although the queue delivered many of them
// several times, some to two workers at once, and lost acknowledgements on
// both sides.
func TestEachMessageTakesEffectOnceWhateverTheQueueRedelivers(t *testing.T) {
	cfg := config{messages: 120, accounts: 10, workers: 4, visibility: 40 * time.Millisecond,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var out strings.Builder
	r, err := run(context.Background(), cfg, &out)
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())

	// The queue did fail, in every way the example claims.
	assert.Equal(t, 120/publishAckEvery, r.republished, "publishes whose ack was lost")
	assert.Positive(t, r.crashes, "crashes between commit and ack")
	assert.Positive(t, r.lostAcks, "acks lost")
	assert.Positive(t, r.stalls, "workers stalled past the visibility timeout")
	assert.Positive(t, r.overlaps, "messages held by two workers at once")
	assert.GreaterOrEqual(t, r.redeliveries, r.crashes+r.lostAcks, "every unacknowledged copy comes back")
	assert.Equal(t, 120+r.republished+r.redeliveries, r.deliveries)

	// And each message took effect once.
	assert.Equal(t, 120, r.applied)
	assert.Equal(t, r.deliveries-120-r.contended, r.duplicates, "every other delivery was absorbed")
	assert.Equal(t, 120, r.events)
	assert.True(t, r.onePerID, "one event per message ID")
	assert.Empty(t, r.wrongBalances)
	assert.Equal(t, r.wantPoints, r.points)
	assert.Contains(t, out.String(), "exactly once: 120 events, one per message ID")
}

// A data folder can be reused: a second run adds its own accounts.
func TestARunReusesItsDataFolder(t *testing.T) {
	cfg := config{dataDir: t.TempDir(), messages: 20, accounts: 4, workers: 2, visibility: 40 * time.Millisecond,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for range 2 {
		r, err := run(context.Background(), cfg, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, 20, r.events)
	}
}
