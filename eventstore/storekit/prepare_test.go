package storekit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// PrepareAppend's events share no memory with the caller's; SharedData
// leaves each payload the caller's, and still clones the metadata's map,
// which a store keeps as it is.
func TestPrepareAppendCopiesDataUnlessShared(t *testing.T) {
	ctx := context.Background()
	in := func() []eventstore.EventData {
		return []eventstore.EventData{
			{Type: "t", Data: []byte("ab"), Metadata: eventstore.Metadata{Extra: map[string]string{"k": "v"}}},
			{Type: "t", Data: []byte("cde")},
		}
	}

	events := in()
	out, err := storekit.PrepareAppend(ctx, "s", events)
	require.NoError(t, err)
	events[0].Data[0], events[1].Data[0] = 'X', 'X'
	assert.Equal(t, "ab", string(out[0].Data))
	assert.Equal(t, "cde", string(out[1].Data))
	assert.Len(t, append(out[0].Data, 'Z'), 3)
	assert.Equal(t, "cde", string(out[1].Data), "appending to one copy must not reach the next")

	events = in()
	out, err = storekit.PrepareAppendWith(ctx, "s", events, storekit.PrepareOptions{SharedData: true})
	require.NoError(t, err)
	assert.Same(t, &events[0].Data[0], &out[0].Data[0], "SharedData leaves the caller's payload")
	assert.Same(t, &events[1].Data[0], &out[1].Data[0])
	events[0].Metadata.Extra["k"] = "changed"
	assert.Equal(t, "v", out[0].Metadata.Extra["k"], "the metadata is a copy either way")

	// Refusals are the same with shared data: nil data is still nil.
	_, err = storekit.PrepareAppendWith(ctx, "s", []eventstore.EventData{{Type: "t"}}, storekit.PrepareOptions{SharedData: true})
	var bad *eventstore.InvalidArgumentError
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, "data", bad.Field)
}
