package codec_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore/memory"
	"github.com/cairn-es/cairn/upcast"
)

// OrderState is an aggregate's snapshot at schema version 3.
type OrderState struct {
	OrderID string   `json:"order_id"`
	Seats   []string `json:"seats"`
	Paid    bool     `json:"paid"`
}

func snapshotRegistry(t *testing.T) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderState](reg, "order.snapshot", 3))
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	require.NoError(t, reg.Upcast(
		// v2 -> v3 adds paid, false for every old snapshot.
		upcast.TransformJSON("order.snapshot", 2, func(f map[string]json.RawMessage) error {
			f["paid"] = json.RawMessage(`false`)
			return nil
		}),
		// v1 snapshots counted seats without naming them: no way forward.
		upcast.Drop("order.snapshot", 1),
		upcast.Split("order.combined", 1, func(r upcast.Raw) ([]upcast.Raw, error) {
			return []upcast.Raw{{Type: "order.snapshot", Version: 3, Data: r.Data}, {Type: "order.snapshot", Version: 3, Data: r.Data}}, nil
		}).Into(upcast.Key{Type: "order.snapshot", Version: 3}),
	))
	require.NoError(t, reg.Validate())
	return reg
}

func TestSnapshotRoundTripAndUpcast(t *testing.T) {
	reg := snapshotRegistry(t)
	state := OrderState{OrderID: "o-1", Seats: []string{"A1"}, Paid: true}
	raw, err := reg.EncodeValue(&state)
	require.NoError(t, err)
	assert.Equal(t, upcast.Key{Type: "order.snapshot", Version: 3}, raw.Key())

	got, err := codec.DecodeValueAs[OrderState](reg, raw)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	old := upcast.Raw{Type: "order.snapshot", Version: 2, Data: []byte(`{"order_id":"o-1","seats":["A1"]}`)}
	got, err = codec.DecodeValueAs[OrderState](reg, old)
	require.NoError(t, err)
	assert.Equal(t, OrderState{OrderID: "o-1", Seats: []string{"A1"}}, got)
}

func TestSnapshotWithoutPathIsDiscarded(t *testing.T) {
	reg := snapshotRegistry(t)
	cases := map[string]struct {
		raw      upcast.Raw
		sentinel error
		detail   string
	}{
		"dropped by the chain": {upcast.Raw{Type: "order.snapshot", Version: 1, Data: []byte(`{}`)}, codec.ErrNoUpcastPath, "drops it"},
		"older than any step":  {upcast.Raw{Type: "order.snapshot", Version: 0, Data: []byte(`{}`)}, codec.ErrNoUpcastPath, "no upcaster brings v0"},
		"split by the chain":   {upcast.Raw{Type: "order.combined", Version: 1, Data: []byte(`{}`)}, codec.ErrNoUpcastPath, "splits it into 2"},
		"newer than the code":  {upcast.Raw{Type: "order.snapshot", Version: 4, Data: []byte(`{}`)}, codec.ErrVersionTooNew, "current version"},
		"undecodable":          {upcast.Raw{Type: "order.snapshot", Version: 3, Data: []byte(`{"seats":7}`)}, codec.ErrUndecodable, "seats"},
		"unknown type":         {upcast.Raw{Type: "cart.snapshot", Version: 1, Data: []byte(`{}`)}, codec.ErrUnknownType, "cart.snapshot"},
		"another Go type":      {upcast.Raw{Type: "order.placed", Version: 1, Data: []byte(`{}`)}, codec.ErrUnexpectedType, "got codec_test.OrderPlaced, want codec_test.OrderState"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := codec.DecodeValueAs[OrderState](reg, tc.raw)
			require.ErrorIs(t, err, tc.sentinel)
			assert.Zero(t, got)
			var de *codec.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.raw.Type, de.Type)
			assert.Equal(t, tc.raw.Version, de.SchemaVersion)
			assert.Empty(t, de.Stream)
			assert.Contains(t, err.Error(), "decode value of type")
			assert.Contains(t, err.Error(), tc.detail)
		})
	}
}

func TestSnapshotHelpers(t *testing.T) {
	ctx := context.Background()
	reg := snapshotRegistry(t)
	snaps := memory.New()

	state := OrderState{OrderID: "o-1", Seats: []string{"A1"}, Paid: true}
	s, err := reg.EncodeSnapshot("order-o-1", 41, state)
	require.NoError(t, err)
	require.NoError(t, snaps.SaveSnapshot(ctx, s))
	loaded, ok, err := snaps.LoadSnapshot(ctx, "order-o-1")
	require.NoError(t, err)
	require.True(t, ok)
	got, err := codec.DecodeSnapshot[OrderState](reg, loaded)
	require.NoError(t, err)
	assert.Equal(t, state, got)

	// A snapshot written before the state had a way forward: discard, replay.
	loaded.SchemaVersion = 1
	_, err = codec.DecodeSnapshot[OrderState](reg, loaded)
	require.ErrorIs(t, err, codec.ErrNoUpcastPath)
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	assert.True(t, de.Snapshot)
	assert.Equal(t, `decode snapshot of stream "order-o-1" at version 41, type "order.snapshot" v1: `+
		`no upcast path to a registered type and version: the upcaster chain drops it`, err.Error())

	_, err = reg.EncodeSnapshot("order-o-1", 41, struct{}{})
	require.ErrorIs(t, err, codec.ErrUnregisteredType)
	assert.Contains(t, err.Error(), `snapshot of stream "order-o-1" at version 41`)
}
