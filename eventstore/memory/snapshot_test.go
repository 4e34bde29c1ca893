package memory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/eventstore/storetest"
)

func TestSnapshotConformance(t *testing.T) {
	storetest.RunSnapshots(t, func(t *testing.T) eventstore.SnapshotStore {
		return memory.NewSnapshotStore()
	})
}

func TestCommandResult(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	ev := func(cmd string) eventstore.EventData {
		return eventstore.EventData{ID: uuid.New(), Type: "x", Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	_, err := s.Append(ctx, "c-1", eventstore.NoStream, ev("a"), ev("a"))
	require.NoError(t, err)
	rb, err := s.Append(ctx, "c-1", eventstore.Exact(1), ev("b"))
	require.NoError(t, err)
	_, err = s.Append(ctx, "c-1", eventstore.Exact(2), ev(""), ev("c"))
	require.NoError(t, err)
	_, err = s.Append(ctx, "c-2", eventstore.NoStream, ev("b"))
	require.NoError(t, err)

	got, found, err := s.CommandResult(ctx, "c-1", "a")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, uint64(0), got.FirstVersion)
	assert.Equal(t, uint64(1), got.LastVersion)
	assert.True(t, got.Duplicate)

	got, found, err = s.CommandResult(ctx, "c-1", "b")
	require.NoError(t, err)
	require.True(t, found, "only this stream's events")
	assert.Equal(t, rb, eventstore.AppendResult{FirstVersion: got.FirstVersion, LastVersion: got.LastVersion, Position: got.Position},
		"the versions and position of the command's append")

	for _, q := range [][2]string{{"c-1", "zzz"}, {"c-1", ""}, {"c-9", "a"}} {
		_, found, err = s.CommandResult(ctx, q[0], q[1])
		require.NoError(t, err)
		assert.False(t, found, "stream %q command %q", q[0], q[1])
	}
	_, _, err = s.CommandResult(ctx, "", "a")
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	require.NoError(t, s.Close())
	_, _, err = s.CommandResult(ctx, "c-1", "a")
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}
