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

func TestEventsByCommand(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	ev := func(cmd string) eventstore.EventData {
		return eventstore.EventData{ID: uuid.New(), Type: "x", Data: []byte("{}"), Metadata: eventstore.Metadata{CommandID: cmd}}
	}
	_, err := s.Append(ctx, "c-1", eventstore.NoStream, ev("a"), ev("a"))
	require.NoError(t, err)
	_, err = s.Append(ctx, "c-1", eventstore.Exact(1), ev("b"))
	require.NoError(t, err)
	_, err = s.Append(ctx, "c-2", eventstore.NoStream, ev("b"))
	require.NoError(t, err)

	got, err := s.EventsByCommand(ctx, "c-1", "a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []uint64{0, 1}, []uint64{got[0].Version, got[1].Version}, "in version order")

	got, err = s.EventsByCommand(ctx, "c-1", "b")
	require.NoError(t, err)
	require.Len(t, got, 1, "only this stream's events")
	assert.Equal(t, uint64(2), got[0].Version)

	for _, q := range [][2]string{{"c-1", "zzz"}, {"c-1", ""}, {"c-9", "a"}} {
		got, err = s.EventsByCommand(ctx, q[0], q[1])
		require.NoError(t, err)
		assert.Empty(t, got, "stream %q command %q", q[0], q[1])
	}
	_, err = s.EventsByCommand(ctx, "", "a")
	assert.ErrorIs(t, err, eventstore.ErrInvalidArgument)
	require.NoError(t, s.Close())
	_, err = s.EventsByCommand(ctx, "c-1", "a")
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}
