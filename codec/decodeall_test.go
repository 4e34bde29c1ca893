package codec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/memory"
)

func TestDecodeAllOverAStoreRead(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })

	events, err := reg.EncodeAll(OrderPlaced{OrderID: "o-1", Seats: 2}, OrderCancelled{OrderID: "o-1", Reason: "late"})
	require.NoError(t, err)
	events = append(events, eventstore.EventData{Type: "order.mystery", SchemaVersion: 1, Data: []byte(`{}`)})
	_, err = store.Append(ctx, "order-o-1", eventstore.NoStream, events...)
	require.NoError(t, err)

	var values []any
	var errs []error
	for d, err := range reg.DecodeAll(store.ReadStream(ctx, "order-o-1", eventstore.ReadOptions{})) {
		if err != nil {
			errs = append(errs, err)
			assert.Equal(t, uint64(2), d.Event.Version, "a failed decode carries the stored event")
			continue
		}
		values = append(values, d.Value)
	}
	assert.Equal(t, []any{OrderPlaced{OrderID: "o-1", Seats: 2}, OrderCancelled{OrderID: "o-1", Reason: "late"}}, values)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], codec.ErrUnknownType)
}

func TestDecodeAllPassesReadErrorsAndStops(t *testing.T) {
	reg := newRegistry(t)
	readErr := errors.New("disk on fire")
	source := func(yield func(eventstore.Event, error) bool) {
		data, _ := reg.Encode(OrderPlaced{OrderID: "o-1"})
		if !yield(stored(data, "order-o-1", 0), nil) {
			return
		}
		if !yield(eventstore.Event{}, readErr) {
			return
		}
		t.Error("DecodeAll went on after its consumer stopped")
	}
	n := 0
	for _, err := range reg.DecodeAll(source) {
		n++
		if err != nil {
			require.ErrorIs(t, err, readErr)
			break
		}
	}
	assert.Equal(t, 2, n)
}
