package saga_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/saga"
)

// roomFreed carries no ID: the stream it is stored in names the room.
type (
	roomFreed  struct{}
	roomsState struct{ Sources []string }
)

// TestInstanceFromSeesWhereTheEventCameFrom: issue 23, item 4. Instance
// got the event and its metadata only, so an event without the
// instance's ID in it could not find its instance from its stream.
// Promise: InstanceFrom gets the stored event's stream and version, or a
// delivery's source and sequence; a mapping sets one of the two.
func TestInstanceFromSeesWhereTheEventCameFrom(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[roomFreed](reg, "room.freed", 1))
	require.NoError(t, codec.Register[roomsState](reg, "rooms.state", 1))
	rooms, err := saga.New[roomsState]("rooms", reg, saga.Options[roomsState]{})
	require.NoError(t, err)
	require.NoError(t, saga.On(rooms, saga.Event[roomsState, roomFreed]{
		InstanceFrom: func(_ roomFreed, from saga.Origin) string { return strings.TrimPrefix(from.Source, "room-") },
		Starts:       true,
		Handle: func(_ context.Context, s *roomsState, _ roomFreed, _ *saga.Output) error {
			s.Sources = append(s.Sources, "seen")
			return nil
		},
	}))
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	r, err := saga.NewRunner(rooms, store, nil, saga.RunnerOptions{})
	require.NoError(t, err)

	data, err := reg.Encode(roomFreed{})
	require.NoError(t, err)
	_, err = store.Append(ctx, "room-101", eventstore.NoStream, data)
	require.NoError(t, err)
	for ev, err := range store.ReadStream(ctx, "room-101", eventstore.Forward(0)) {
		require.NoError(t, err)
		out, err := r.HandleStored(ctx, ev)
		require.NoError(t, err)
		assert.Equal(t, saga.Handled, out)
	}
	x, err := r.Explain(ctx, "101")
	require.NoError(t, err)
	assert.True(t, x.Exists, "the stored event's stream named its instance")

	out, err := r.Deliver(ctx, saga.Delivery{Source: "room-102", Event: roomFreed{}})
	require.NoError(t, err)
	assert.Equal(t, saga.Handled, out)
	id, err := r.InstanceFrom(roomFreed{}, saga.Origin{Source: "room-102"})
	require.NoError(t, err)
	assert.Equal(t, "102", id)

	both := saga.Event[roomsState, roomFreed]{Instance: func(roomFreed, eventstore.Metadata) string { return "x" },
		InstanceFrom: func(roomFreed, saga.Origin) string { return "y" }, Handle: func(context.Context, *roomsState, roomFreed, *saga.Output) error { return nil }}
	other, err := saga.New[roomsState]("rooms2", reg, saga.Options[roomsState]{})
	require.NoError(t, err)
	assert.ErrorIs(t, saga.On(other, both), saga.ErrInvalidSetup, "one of Instance and InstanceFrom, not both")
}
