package codec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// TestReservedNamesAreRefused: no user type may be registered under
// Cairn's own prefix, and no upcaster may claim or rewrite Cairn's own
// records (an aggregate's recorded rejections, a saga's step records).
func TestReservedNamesAreRefused(t *testing.T) {
	assert.True(t, codec.IsReserved("cairn.command-rejected"))
	assert.False(t, codec.IsReserved("cairnish.event"), "only the prefix with its dot is reserved")

	reg := codec.NewRegistry(codec.Options{})
	err := codec.Register[OrderPlaced](reg, codec.ReservedPrefix+"order.placed", 1)
	require.ErrorIs(t, err, codec.ErrInvalidRegistration)
	var re *codec.RegistrationError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, re.Reason, `"cairn."`, "the reason names the prefix")
	require.ErrorIs(t, reg.Validate(), codec.ErrInvalidSetup, "an ignored refusal still fails the set-up")

	noop := func(r upcast.Raw) (upcast.Raw, error) { return r, nil }
	for what, step := range map[string]upcast.Step{
		"a transform of a marker": upcast.Transform("cairn.command-rejected", 1, noop),
		"a rename of a marker":    upcast.Rename("cairn.command-rejected", 1, "order.placed", 2),
		"a drop of a step record": upcast.Drop("cairn.saga.step", 1),
	} {
		reg := codec.NewRegistry(codec.Options{})
		require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 2))
		err := reg.Upcast(step, upcast.Rename("order.old", 1, "order.placed", 2))
		require.ErrorIs(t, err, upcast.ErrInvalidStep, what)
		assert.Contains(t, err.Error(), "cairn.", what)
		require.ErrorIs(t, reg.Validate(), upcast.ErrInvalidStep, what)
		assert.Equal(t, []string{"order.old", "order.placed"}, reg.SourceTypes("order.placed"), "%s: the other steps are kept", what)
	}
}

// TestDecodeAllReadsAStreamAsItsDomainEvents: issue 23, item 8. An
// aggregate's stream holds Cairn's own records beside its events (a
// recorded rejection); ReservedPrefix said readers skip them, but
// DecodeAll yielded each as an unknown-type error, so a user reading the
// stream had to filter by hand. Promise: DecodeAll skips them; Decode of
// one says it is unknown.
func TestDecodeAllReadsAStreamAsItsDomainEvents(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[OrderPlaced](reg, "order.placed", 1))
	placed, err := reg.Encode(OrderPlaced{OrderID: "o-1"})
	require.NoError(t, err)
	stream := []eventstore.Event{
		{StreamID: "order-o-1", Version: 0, EventData: placed},
		{StreamID: "order-o-1", Version: 1, EventData: eventstore.EventData{Type: "cairn.command-rejected", SchemaVersion: 1, Data: []byte(`{}`)}},
		{StreamID: "order-o-1", Version: 2, EventData: placed},
	}
	var versions []uint64
	read := func(yield func(eventstore.Event, error) bool) {
		for _, e := range stream {
			if !yield(e, nil) {
				return
			}
		}
	}
	for d, err := range reg.DecodeAll(read) {
		require.NoError(t, err)
		versions = append(versions, d.Event.Version)
	}
	assert.Equal(t, []uint64{0, 2}, versions, "the recorded rejection is skipped")
	_, err = reg.Decode(stream[1])
	assert.ErrorIs(t, err, codec.ErrUnknownType)
}
