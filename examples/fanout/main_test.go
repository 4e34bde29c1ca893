package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets this test binary be the fan-out worker that the example
// starts as a child process and that kills itself half-way through a post.
func TestMain(m *testing.M) {
	if isKilledWorker() {
		os.Exit(killedWorker())
	}
	os.Exit(m.Run())
}

// Every follower's timeline holds every post exactly once, after a worker
// was killed half-way through a post, the queue redelivered and duplicated
// messages, and two deployments consumed the queue and ran the fan-out at
// once; the poison post is parked with its reason and the posts behind it
// went through. A second run on the same folder adds its own posts.
func TestEveryTimelineHoldsEveryPostOnce(t *testing.T) {
	dir := t.TempDir()
	for round := range 2 {
		cfg := config{dataDir: dir, posts: 24, timelines: 10, workers: 4,
			logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		var out strings.Builder
		r, err := run(context.Background(), cfg, &out)
		require.NoError(t, err, out.String())
		t.Logf("round %d:\n%s", round+1, out.String())

		// The queue: every message took effect once.
		assert.Equal(t, 24/publishedTwiceEvery, r.twice)
		assert.Positive(t, r.crashes, "workers died between commit and ack")
		assert.Equal(t, 24, r.applied)
		assert.Equal(t, r.deliveries-24-r.contended, r.duplicates, "every other delivery was absorbed")
		assert.Equal(t, 24, r.stored)

		// The kill: the post being written is in no timeline, and every
		// timeline holds the same posts.
		assert.Contains(t, r.killStatus, "killed")
		assert.Zero(t, r.killedPostIn)
		assert.True(t, r.sameAfterKill)
		assert.Less(t, len(r.afterKill), 24)
		assert.NotContains(t, r.afterKill, r.killedPost)

		// The two deployments: each event after the killed worker's
		// checkpoint was checkpointed once, by one of them.
		assert.Equal(t, r.leftAfterKill, r.handled[0]+r.handled[1])

		// The poison post: parked alone, with its reason, and the posts
		// behind it went through.
		require.Len(t, r.deadLetters, 1)
		assert.Equal(t, r.poisonPost, r.deadLetters[0].post)
		assert.Contains(t, r.deadLetters[0].reason, "CHECK constraint failed: length(body) <= 280")
		assert.Equal(t, 3, r.deadLetters[0].attempts)
		assert.Equal(t, r.behind, r.behindEverywhere)

		// Every timeline: each post but the poison one, once.
		assert.Len(t, r.perTimeline, 10)
		for follower, n := range r.perTimeline {
			assert.Equal(t, 23, n, follower)
		}
		assert.Empty(t, r.problems)
	}
}
