package storecopy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storecopy"
)

// Broken promise (docs/cli.md, Copying a store: "to move a service, copy
// while it runs, stop it, then run the copy again with --consumers";
// refuseLeased's own reason: a translated checkpoint "would move it back
// to where the source's stands, making it apply again what it applied"):
// the guard is only a live lease. Once the service has run on the target
// and stopped (lease released, or lapsed after a crash), a rerun of the
// copy with Consumers saves the source's older checkpoint over the
// target's later one (SaveCheckpoint expects the stored position, whatever
// it is), silently moving the consumer back: on its next start it applies
// again every event it had applied on the target. Expected: a checkpoint
// that the target holds at a later position than the translation is left
// alone (or the copy refuses, naming the consumer).
func TestReview2CopyMovesTargetCheckpointBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	from, err := sqlite.Open(ctx, filepath.Join(dir, "from.db"), sqlite.Options{})
	require.NoError(t, err)
	defer from.Close()
	to, err := sqlite.Open(ctx, filepath.Join(dir, "to.db"), sqlite.Options{})
	require.NoError(t, err)
	defer to.Close()
	var at []eventstore.Position
	for i := range 10 {
		r, err := from.Append(ctx, fmt.Sprintf("s-%d", i), eventstore.NoStream, eventstore.EventData{Type: "t", Data: []byte(`{}`)})
		require.NoError(t, err)
		at = append(at, r.Position)
	}
	require.NoError(t, from.SaveCheckpoint(ctx, "proj", eventstore.Start, at[3], 0))
	_, err = storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true, NoVerify: true})
	require.NoError(t, err)

	// The service runs on the target now: it reads on to the last event,
	// and stops cleanly.
	var last eventstore.Position
	for e, err := range to.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		last = e.Position
	}
	cp, err := to.Checkpoint(ctx, "proj")
	require.NoError(t, err)
	l, ok, err := to.AcquireLease(ctx, "proj", "target/proj", 60e9)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, to.SaveCheckpoint(ctx, "proj", cp.Position, last, l.Fence))
	require.NoError(t, to.ReleaseLease(ctx, l))

	// The operator runs the same copy command again.
	_, err = storecopy.Copy(ctx, from, to, storecopy.Options{Consumers: true, NoVerify: true})
	if err != nil {
		t.Logf("the rerun refused: %v", err)
		return
	}
	got, err := to.Checkpoint(ctx, "proj")
	require.NoError(t, err)
	assert.Equal(t, last, got.Position, "the rerun moved the target's checkpoint of proj back from %s to %s", last, got.Position)
}
