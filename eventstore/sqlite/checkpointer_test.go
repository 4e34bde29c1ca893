package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	zs "zombiezen.com/go/sqlite"

	"github.com/cairn-es/cairn/eventstore"
)

// appendMany appends one event to each of n new streams, one commit each.
func appendMany(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		_, err := s.Append(context.Background(), fmt.Sprintf("%s-%d", prefix, i), eventstore.NoStream,
			eventstore.EventData{Type: "t", Data: []byte(`{"n":1}`)})
		require.NoError(t, err)
	}
}

// walFrames checkpoints PASSIVE on a connection of its own and returns how
// many frames the log holds.
func walFrames(t *testing.T, path string) int64 {
	t.Helper()
	conn, err := zs.OpenConn(path, zs.OpenReadWrite)
	require.NoError(t, err)
	defer conn.Close()
	stmt, err := conn.Prepare("PRAGMA wal_checkpoint(PASSIVE)")
	require.NoError(t, err)
	row, err := stmt.Step()
	require.NoError(t, err)
	require.True(t, row)
	frames := stmt.ColumnInt64(1)
	require.NoError(t, stmt.Reset())
	return frames
}

// TestCheckpointsKeepTheLogShort: the writer's connections leave
// checkpoints to the checkpointer, which keeps the log near checkpointFrames
// and well below the backstop, so that the log starts over again and again
// rather than growing with every commit.
func TestCheckpointsKeepTheLogShort(t *testing.T) {
	s := openTest(t)
	cp := s.w.checkpoints
	require.NotNil(t, cp)
	appendMany(t, s, "a", 2000)
	require.Eventually(t, func() bool { return cp.runs.Load() > 0 }, 10*time.Second, time.Millisecond)
	assert.Less(t, cp.frames.Load(), int64(backstopFrames), "the log reached the backstop: the checkpointer fell behind")
	assert.Less(t, walFrames(t, s.path), int64(backstopFrames))
	assert.Greater(t, cp.every.Load(), int64(1), "paced by what a commit writes")

	n := 0
	for e, err := range s.ReadAll(context.Background(), eventstore.Position{}, eventstore.Filter{}) {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("a-%d", n), e.StreamID)
		n++
	}
	require.Equal(t, 2000, n)
}

// TestCheckpointsWaitForAReader: a read transaction that began before many
// commits keeps their frames from being copied; appends go on while it
// lasts, and the checkpoints after it copy the log.
func TestCheckpointsWaitForAReader(t *testing.T) {
	s := openTest(t)
	appendMany(t, s, "before", 10)
	reader, err := zs.OpenConn(s.path, zs.OpenReadOnly)
	require.NoError(t, err)
	defer reader.Close()
	require.NoError(t, execute(reader, "BEGIN"))
	stmt, err := reader.Prepare("SELECT count(*) FROM cairn_events")
	require.NoError(t, err)
	row, err := stmt.Step()
	require.NoError(t, err)
	require.True(t, row)
	require.EqualValues(t, 10, stmt.ColumnInt64(0), "the reader's snapshot")
	require.NoError(t, stmt.Reset())

	appendMany(t, s, "during", 1500)
	require.NoError(t, execute(reader, "COMMIT"))
	runs := s.w.checkpoints.runs.Load()
	appendMany(t, s, "after", 1500)
	require.Eventually(t, func() bool { return s.w.checkpoints.runs.Load() > runs }, 10*time.Second, time.Millisecond)
	assert.Less(t, walFrames(t, s.path), int64(backstopFrames))
}

// TestCheckpointsWithAnotherCheckpointer: another connection checkpointing
// (another process's store, or an operator's sqlite3 shell) makes the
// checkpointer's attempt busy, which is no failure: nothing is logged and
// appends go on.
func TestCheckpointsWithAnotherCheckpointer(t *testing.T) {
	var logged bytes.Buffer
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"),
		Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	runs := s.w.checkpoints.runs.Load()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn, err := zs.OpenConn(s.path, zs.OpenReadWrite)
			if err != nil {
				return
			}
			_ = execute(conn, "PRAGMA wal_checkpoint(PASSIVE)")
			conn.Close()
		}
	}()
	appendMany(t, s, "c", 1500)
	close(stop)
	<-done
	appendMany(t, s, "d", 1500)
	require.Eventually(t, func() bool { return s.w.checkpoints.runs.Load() > runs }, 10*time.Second, time.Millisecond)
	assert.Empty(t, logged.String())
}

// TestCloseDuringCheckpointsLogsNothing: Close interrupts a checkpoint under
// way, which is no failure to report.
func TestCloseDuringCheckpointsLogsNothing(t *testing.T) {
	for range 20 {
		var logged bytes.Buffer
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "events.db"),
			Options{Synchronous: SyncNormal, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		require.NoError(t, err)
		s.w.checkpoints.every.Store(1) // a checkpoint after every commit
		appendMany(t, s, "c", 50)
		require.NoError(t, s.Close())
		require.Empty(t, logged.String())
	}
}
