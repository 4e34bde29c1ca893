package commandtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/aggregate"
	"github.com/cairn-es/cairn/command"
)

var metadataTests = []test{
	{"FlowsIntoEvents", testMetadataFlows},
	{"Defaults", testMetadataDefaults},
}

func testMetadataFlows(t *testing.T, e *env) {
	id := e.id("md")
	msg := command.Message{
		ID:            e.prefix + "cmd",
		CorrelationID: "flow-7",
		CausationID:   "msg-3",
		Extra:         map[string]string{"tenant": "acme"},
		Command:       IncrementTwice{ID: id},
	}
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), msg)
	require.NoError(t, err)
	evs := e.events(id)
	require.Len(t, evs, 2)
	for i, ev := range evs {
		assert.Equal(t, msg.ID, ev.Metadata.CommandID)
		assert.Equal(t, "flow-7", ev.Metadata.CorrelationID)
		assert.Equal(t, "msg-3", ev.Metadata.CausationID)
		assert.Equal(t, map[string]string{"tenant": "acme", aggregate.CommandTypeKey: "counter.increment-twice"}, ev.Metadata.Extra,
			"the caller's metadata, and the command's type as the codec names it")
		assert.Equal(t, aggregate.EventID("counter-"+id, msg.ID, i), ev.ID, "event IDs derive from the command ID")
		assert.Equal(t, "counter.incremented", ev.Type)
	}
}

func testMetadataDefaults(t *testing.T, e *env) {
	id := e.id("mdd")
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{ID: e.prefix + "c", Command: Increment{ID: id}})
	require.NoError(t, err)
	evs := e.events(id)
	require.Len(t, evs, 1)
	assert.Equal(t, e.prefix+"c", evs[0].Metadata.CorrelationID, "a command without a correlation ID starts a flow")
	assert.Equal(t, e.prefix+"c", evs[0].Metadata.CausationID)
}
