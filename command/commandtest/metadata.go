package commandtest

import (
	"context"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
	"github.com/cairn-es/cairn/internal/check"
)

var metadataTests = []test{
	{"FlowsIntoEvents", testMetadataFlows},
	{"Defaults", testMetadataDefaults},
}

func testMetadataFlows(t testing.TB, e *env) {
	id := e.id("md")
	msg := command.Message{
		ID:            e.prefix + "cmd",
		CorrelationID: "flow-7",
		CausationID:   "msg-3",
		Extra:         map[string]string{"tenant": "acme"},
		Command:       IncrementTwice{ID: id},
	}
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), msg)
	check.NoError(t, err)
	evs := e.events(id)
	check.Len(t, evs, 2)
	for i, ev := range evs {
		check.Equal(t, ev.Metadata.CommandID, msg.ID)
		check.Equal(t, ev.Metadata.CorrelationID, "flow-7")
		check.Equal(t, ev.Metadata.CausationID, "msg-3")
		check.Equal(t, ev.Metadata.Extra, map[string]string{"tenant": "acme", busrepo.CommandTypeKey: "counter.increment-twice"},
			"the caller's metadata, and the command's type as the codec names it")
		check.Equal(t, ev.ID, storekit.CommandEventID("counter-"+id, msg.ID, i), "event IDs derive from the command ID")
		check.Equal(t, ev.Type, "counter.incremented")
	}
}

func testMetadataDefaults(t testing.TB, e *env) {
	id := e.id("mdd")
	_, err := e.bus(command.Options{}, 0).Dispatch(context.Background(), command.Message{ID: e.prefix + "c", Command: Increment{ID: id}})
	check.NoError(t, err)
	evs := e.events(id)
	check.Len(t, evs, 1)
	check.Equal(t, evs[0].Metadata.CorrelationID, e.prefix+"c", "a command without a correlation ID starts a flow")
	check.Equal(t, evs[0].Metadata.CausationID, e.prefix+"c")
}
