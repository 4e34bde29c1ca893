package codec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

type OrderPlaced struct {
	OrderID string `json:"order_id"`
	Seats   int    `json:"seats"`
}

type OrderCancelled struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

type Greeter interface{ Greet() string }

func newRegistry(t *testing.T) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	require.NoError(t, codec.Register[OrderCancelled](reg, "order.cancelled", 3))
	return reg
}

// stored returns data as the store would give it back at the given place.
func stored(data eventstore.EventData, stream string, version uint64) eventstore.Event {
	if data.ID == (uuid.UUID{}) {
		data.ID = eventstore.NewEventID()
	}
	return eventstore.Event{
		EventData:  data,
		StreamID:   stream,
		Version:    version,
		Position:   eventstore.Position{Major: version + 100},
		RecordedAt: time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC),
	}
}

func TestRegisterRejectsBadRegistrations(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))

	cases := map[string]struct {
		register func() error
		want     string
	}{
		"empty name":        {func() error { return codec.Register[OrderCancelled](reg, "", 1) }, "empty"},
		"control character": {func() error { return codec.Register[OrderCancelled](reg, "order\x00cancelled", 1) }, "printable"},
		"long name":         {func() error { return codec.Register[OrderCancelled](reg, strings.Repeat("x", 257), 1) }, "limit"},
		"version 0":         {func() error { return codec.Register[OrderCancelled](reg, "order.cancelled", 0) }, "version 0"},
		"duplicate name":    {func() error { return codec.Register[OrderCancelled](reg, "order.placed", 2) }, "codec_test.OrderPlaced"},
		"duplicate Go type": {func() error { return codec.Register[OrderPlaced](reg, "order.placed.again", 1) }, `"order.placed" v1`},
		"interface type":    {func() error { return codec.Register[Greeter](reg, "greeter", 1) }, "interface"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.register()
			require.ErrorIs(t, err, codec.ErrInvalidRegistration)
			var re *codec.RegistrationError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Ignoring those errors does not give a usable registry.
	err := reg.Validate()
	require.ErrorIs(t, err, codec.ErrInvalidSetup)
	require.ErrorIs(t, err, codec.ErrInvalidRegistration)
	_, err = reg.Encode(OrderPlaced{})
	require.ErrorIs(t, err, codec.ErrInvalidSetup)
	_, err = reg.Decode(stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{}`)}, "order-1", 0))
	require.ErrorIs(t, err, codec.ErrInvalidSetup)
}

func TestRegistryFreezesOnFirstUse(t *testing.T) {
	reg := newRegistry(t)
	_, err := reg.Encode(OrderPlaced{OrderID: "o-1"})
	require.NoError(t, err)

	err = codec.Register[time.Time](reg, "clock.tick", 1)
	require.ErrorIs(t, err, codec.ErrFrozen)
	require.ErrorIs(t, reg.Upcast(upcast.Drop("order.placed", 0)), codec.ErrFrozen)
	// The rejected calls changed nothing.
	require.NoError(t, reg.Validate())
	_, _, ok := codec.NameOf[time.Time](reg)
	assert.False(t, ok)
}

func TestNameOf(t *testing.T) {
	reg := newRegistry(t)
	name, version, ok := codec.NameOf[OrderCancelled](reg)
	require.True(t, ok)
	assert.Equal(t, "order.cancelled", name)
	assert.Equal(t, uint32(3), version)
	// NameOf is a set-up helper: it does not freeze.
	require.NoError(t, codec.Register[time.Time](reg, "clock.tick", 1))
}

func TestEncode(t *testing.T) {
	reg := newRegistry(t)

	data, err := reg.Encode(OrderCancelled{OrderID: "o-1", Reason: "late"})
	require.NoError(t, err)
	assert.Equal(t, "order.cancelled", data.Type)
	assert.Equal(t, uint32(3), data.SchemaVersion)
	assert.JSONEq(t, `{"order_id":"o-1","reason":"late"}`, string(data.Data))
	assert.Equal(t, uuid.UUID{}, data.ID, "the caller sets the ID")

	byPointer, err := reg.Encode(&OrderCancelled{OrderID: "o-1", Reason: "late"})
	require.NoError(t, err)
	assert.Equal(t, data, byPointer)

	var nilPointer *OrderCancelled
	_, err = reg.Encode(nilPointer)
	var ee *codec.EncodeError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "order.cancelled", ee.Name)

	_, err = reg.Encode(struct{ X int }{1})
	require.ErrorIs(t, err, codec.ErrUnregisteredType)
	assert.Contains(t, err.Error(), "struct { X int }")

	_, err = reg.Encode(nil)
	require.ErrorIs(t, err, codec.ErrUnregisteredType)

	all, err := reg.EncodeAll(OrderPlaced{OrderID: "o-1", Seats: 2}, OrderCancelled{OrderID: "o-1"})
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "order.placed", all[0].Type)
	assert.Equal(t, "order.cancelled", all[1].Type)

	_, err = reg.EncodeAll(OrderPlaced{}, 42)
	require.ErrorIs(t, err, codec.ErrUnregisteredType)
	assert.Contains(t, err.Error(), "event 1 of 2")
}

// withChan is a struct that JSON cannot serialize.
type withChan struct{ C chan int }

func TestEncodeRejectsUnserializableValue(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[withChan](reg, "channel", 1))
	_, err := reg.Encode(withChan{C: make(chan int)})
	var ee *codec.EncodeError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "channel", ee.Name)
	assert.Contains(t, err.Error(), "chan int")
}

func TestDecodeCurrentVersion(t *testing.T) {
	reg := newRegistry(t)
	data, err := reg.Encode(OrderPlaced{OrderID: "o-1", Seats: 3})
	require.NoError(t, err)
	data.Metadata = eventstore.Metadata{CorrelationID: "c-1", Extra: map[string]string{"k": "v"}}
	ev := stored(data, "order-o-1", 7)

	got, err := reg.Decode(ev)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, OrderPlaced{OrderID: "o-1", Seats: 3}, got[0].Value, "a T value, not a pointer")
	assert.Equal(t, ev, got[0].Event)
	assert.Equal(t, 0, got[0].Index)
	assert.Equal(t, 1, got[0].Count)
	assert.True(t, got[0].Last())
	other := ev
	other.StreamID = "order-o-2"
	again, err := reg.Decode(other)
	require.NoError(t, err)
	assert.NotEqual(t, got[0].PartID(), again[0].PartID(), "one event ID in two streams is two events")

	switch e := got[0].Value.(type) {
	case OrderPlaced:
		assert.Equal(t, 3, e.Seats)
	default:
		t.Fatalf("decoded %T", e)
	}
}

func TestDecodeAppendReusesSlice(t *testing.T) {
	reg := newRegistry(t)
	data, err := reg.Encode(OrderPlaced{OrderID: "o-1"})
	require.NoError(t, err)
	buf := make([]codec.Decoded, 0, 4)
	buf, err = reg.DecodeAppend(buf, stored(data, "order-o-1", 0))
	require.NoError(t, err)
	buf, err = reg.DecodeAppend(buf, stored(data, "order-o-1", 1))
	require.NoError(t, err)
	require.Len(t, buf, 2)
	assert.Equal(t, uint64(1), buf[1].Event.Version)

	bad := stored(eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{`)}, "order-o-1", 2)
	out, err := reg.DecodeAppend(buf, bad)
	require.Error(t, err)
	assert.Len(t, out, 2, "nothing of a failed event is appended")
}

func TestDecodeErrors(t *testing.T) {
	reg := newRegistry(t)
	cases := map[string]struct {
		data     eventstore.EventData
		sentinel error
		detail   string
	}{
		"unknown type": {eventstore.EventData{Type: "order.shipped", SchemaVersion: 1, Data: []byte(`{}`)},
			codec.ErrUnknownType, `"order.shipped" is neither registered nor upcast`},
		"version too new": {eventstore.EventData{Type: "order.cancelled", SchemaVersion: 4, Data: []byte(`{}`)},
			codec.ErrVersionTooNew, "current version"},
		"old version without upcaster": {eventstore.EventData{Type: "order.cancelled", SchemaVersion: 2, Data: []byte(`{}`)},
			codec.ErrNoUpcastPath, "no upcaster brings v2"},
		"syntax error": {eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"order_id":`)},
			codec.ErrUndecodable, "unexpected end"},
		"wrong field type": {eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{"seats":"three"}`)},
			codec.ErrUndecodable, "seats"},
		"empty data": {eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte{}},
			codec.ErrUndecodable, "unexpected end"},
		"trailing garbage": {eventstore.EventData{Type: "order.placed", SchemaVersion: 1, Data: []byte(`{} x`)},
			codec.ErrUndecodable, "invalid character"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ev := stored(tc.data, "order-o-9", 12)
			got, err := reg.Decode(ev)
			require.ErrorIs(t, err, tc.sentinel)
			assert.Empty(t, got)
			var de *codec.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "order-o-9", de.Stream)
			assert.Equal(t, uint64(12), de.Version)
			assert.Equal(t, eventstore.Position{Major: 112}, de.Position)
			assert.Equal(t, tc.data.Type, de.Type)
			assert.Equal(t, tc.data.SchemaVersion, de.SchemaVersion)
			msg := err.Error()
			for _, want := range []string{`"order-o-9"`, "version 12", "112:0", `"` + tc.data.Type + `"`, tc.detail} {
				assert.Contains(t, msg, want)
			}
			assert.Contains(t, msg, fmt.Sprintf("v%d", tc.data.SchemaVersion))
		})
	}
}

// panicky is a serializer whose Unmarshal panics, as a buggy custom one
// might on data it does not expect.
type panicky struct{ codec.JSON }

func (panicky) Unmarshal([]byte, any) error { panic("boom") }

func TestDecodeRecoversSerializerPanic(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{Serializer: panicky{}})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	data, err := reg.Encode(OrderPlaced{OrderID: "o-1"})
	require.NoError(t, err)
	_, err = reg.Decode(stored(data, "order-o-1", 0))
	require.ErrorIs(t, err, codec.ErrUndecodable)
	assert.Contains(t, err.Error(), "boom")
}

func TestCustomSerializerIsUsed(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{Serializer: upperJSON{}})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	data, err := reg.Encode(OrderPlaced{OrderID: "o-1"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data.Data), "UPPER:"))
	got, err := reg.Decode(stored(data, "order-o-1", 0))
	require.NoError(t, err)
	assert.Equal(t, OrderPlaced{OrderID: "o-1"}, got[0].Value)
}

// upperJSON is JSON with a prefix: enough to tell it from the default.
type upperJSON struct{}

func (upperJSON) Marshal(v any) ([]byte, error) {
	b, err := codec.JSON{}.Marshal(v)
	return append([]byte("UPPER:"), b...), err
}

func (upperJSON) Unmarshal(data []byte, v any) error {
	rest, ok := strings.CutPrefix(string(data), "UPPER:")
	if !ok {
		return errors.New("missing prefix")
	}
	return codec.JSON{}.Unmarshal([]byte(rest), v)
}
