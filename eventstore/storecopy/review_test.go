package storecopy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/sqlite"
	"github.com/cairn-es/cairn/eventstore/storecopy"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// Pins docs/cli.md's copy promises on SQLite: a copy with consumers that
// is cancelled midway and run again translates a checkpoint at the last
// event to the target's copy of it, and one between two events to the
// target's copy of the event before it, into a target that already held
// other streams (so the target's positions differ from the source's).
func TestReviewCancelledCopyWithConsumersResumes(t *testing.T) {
	ctx := context.Background()
	open := func(name string) *sqlite.Store {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), name), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	src, dst := open("src.db"), open("dst.db")
	for i := range 5 {
		_, err := dst.Append(ctx, fmt.Sprintf("other-%d", i), eventstore.Any, eventstore.EventData{Type: "other", Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	var events []eventstore.Event
	for i := range 30 {
		_, err := src.Append(ctx, fmt.Sprintf("s-%d", i%4), eventstore.Any, eventstore.EventData{Type: "item", Data: fmt.Appendf(nil, `{"n":%d}`, i)})
		require.NoError(t, err)
	}
	for e, err := range src.ReadAll(ctx, eventstore.Start, eventstore.Filter{}) {
		require.NoError(t, err)
		events = append(events, e)
	}
	last := events[len(events)-1]
	between := eventstore.Position{Major: events[10].Position.Major, Minor: events[10].Position.Minor + 1}
	require.True(t, events[10].Position.Before(between) && between.Before(events[11].Position), "a position between two events")
	require.NoError(t, src.SaveCheckpoint(ctx, "at-last", eventstore.Start, last.Position, 0))
	require.NoError(t, src.SaveCheckpoint(ctx, "between", eventstore.Start, between, 0))

	cctx, cancel := context.WithCancel(ctx)
	_, err := storecopy.Copy(cctx, src, dst, storecopy.Options{Consumers: true, ProgressEvery: time.Nanosecond,
		Progress: func(p storecopy.Progress) {
			if p.Done >= 12 {
				cancel()
			}
		}})
	require.ErrorIs(t, err, context.Canceled)
	_, err = storecopy.Copy(ctx, src, dst, storecopy.Options{Consumers: true})
	require.NoError(t, err)

	copyOf := func(e eventstore.Event) eventstore.Position {
		for te, err := range dst.ReadStream(ctx, e.StreamID, eventstore.ReadOptions{From: e.Version, Limit: 1}) {
			require.NoError(t, err)
			require.Equal(t, e.ID, te.ID)
			return te.Position
		}
		t.Fatalf("no copy of %s@%d", e.StreamID, e.Version)
		return eventstore.Start
	}
	var cps storekit.CheckpointStore = dst
	cp, err := cps.Checkpoint(ctx, "at-last")
	require.NoError(t, err)
	assert.Equal(t, copyOf(last), cp.Position, "a checkpoint at the last event")
	cp, err = cps.Checkpoint(ctx, "between")
	require.NoError(t, err)
	assert.Equal(t, copyOf(events[10]), cp.Position, "a checkpoint between two events")
}
