package storekit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

func TestInvalidArgumentErrorNamesTheArgument(t *testing.T) {
	var bad *eventstore.InvalidArgumentError

	err := storekit.ValidateConsumerName("bad\x00name")
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, "bad\x00name", bad.Consumer, "a consumer name is the consumer, not a stream")
	assert.Empty(t, bad.Stream)
	assert.Equal(t, `invalid argument: consumer "bad\x00name": consumer name is not printable UTF-8`, err.Error())

	err = storekit.ValidateLease("projector", "", storekit.MinLeaseTTL)
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, `invalid argument: consumer "projector": lease holder is empty`, err.Error())

	err = eventstore.Filter{Types: []string{"ok", "bad\xff"}}.Validate()
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, "filter type", bad.Field)
	assert.Equal(t, `invalid argument: filter type at index 1 "bad\xff" is not printable UTF-8`, err.Error())

	_, err = storekit.PrepareAppend(context.Background(), "order-1", []eventstore.EventData{{Type: "x", Data: []byte{}}, {Type: "", Data: []byte{}}})
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, `invalid argument: stream "order-1", event 1: type is empty`, err.Error())

	err = storekit.ValidateStream("")
	assert.Equal(t, `invalid argument: stream name is empty`, err.Error())
}
