package storekit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventIDByTheBook is CommandEventID as the library computes a UUIDv5: the
// definition the stored IDs were made with, which must never change.
func eventIDByTheBook(stream, commandID string, index int) uuid.UUID {
	name := stream + "\x00" + commandID + "\x00" + strconv.Itoa(index)
	return uuid.NewSHA1(commandIDSpace, []byte(name))
}

// TestCommandEventIDIsStable pins one ID that stores hold, and checks CommandEventID
// against the library's UUIDv5 on names short and long.
func TestCommandEventIDIsStable(t *testing.T) {
	id := CommandEventID("order-1", "cmd-1", 0)
	require.Equal(t, eventIDByTheBook("order-1", "cmd-1", 0), id)
	assert.Equal(t, "95f0eeb4-4a43-5202-bbdc-fc82528db809", id.String(), "the ID stored for this command since the first release")
	assert.Equal(t, uuid.Version(5), id.Version())
	long := strings.Repeat("x", 600)
	assert.Equal(t, eventIDByTheBook(long, long, 12345), CommandEventID(long, long, 12345))
}

func FuzzCommandEventIDIsTheLibrarys(f *testing.F) {
	f.Add("order-1", "cmd-1", 0)
	f.Add("", "", -1)
	f.Add(strings.Repeat("s", 300), "c", 1<<40)
	f.Fuzz(func(t *testing.T, stream, commandID string, index int) {
		require.Equal(t, eventIDByTheBook(stream, commandID, index), CommandEventID(stream, commandID, index))
	})
}

func TestCommandEventIDAllocatesNothing(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = CommandEventID("order-1", "cmd-1", 3) }))
}

// busAppend returns the events of command id in stream, n of them, named
// as the command bus names them.
func busAppend(stream, id string, n int) []eventstore.EventData {
	evs := make([]eventstore.EventData, n)
	for i := range evs {
		evs[i] = eventstore.EventData{ID: CommandEventID(stream, id, i), Type: "x", Data: []byte("{}"),
			Metadata: eventstore.Metadata{CommandID: id}}
	}
	return evs
}

func TestCommandIDsDerived(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		assert.True(t, CommandIDsDerived("order-1", busAppend("order-1", "c1", n)), "%d events named by the bus", n)
	}
	cases := map[string]func() []eventstore.EventData{
		"no events":              func() []eventstore.EventData { return nil },
		"another stream's names": func() []eventstore.EventData { return busAppend("order-2", "c1", 2) },
		"another command's names": func() []eventstore.EventData {
			evs := busAppend("order-1", "c2", 1)
			evs[0].Metadata.CommandID = "c1"
			return evs
		},
		"no command, derived names": func() []eventstore.EventData { return busAppend("order-1", "", 1) },
		"a new ID in the middle": func() []eventstore.EventData {
			evs := busAppend("order-1", "c1", 3)
			evs[1].ID = eventstore.NewEventID()
			return evs
		},
		"two events swapped": func() []eventstore.EventData {
			evs := busAppend("order-1", "c1", 2)
			evs[0], evs[1] = evs[1], evs[0]
			return evs
		},
		"names counted from 1": func() []eventstore.EventData {
			return busAppend("order-1", "c1", 3)[1:]
		},
		"a second command in the append": func() []eventstore.EventData {
			evs := busAppend("order-1", "c1", 2)
			evs[1].Metadata.CommandID = "c2"
			return evs
		},
		"two commands, each named by the bus": func() []eventstore.EventData {
			return append(busAppend("order-1", "c1", 1), busAppend("order-1", "c2", 1)...)
		},
	}
	for name, events := range cases {
		assert.False(t, CommandIDsDerived("order-1", events()), name)
	}
}

func TestCombineCommandResults(t *testing.T) {
	at := func(first, last, pos uint64) eventstore.AppendResult {
		return eventstore.AppendResult{FirstVersion: first, LastVersion: last, Position: eventstore.Position{Major: pos}, Duplicate: true}
	}
	r, found := CombineCommandResults(eventstore.AppendResult{}, false, eventstore.AppendResult{}, false)
	assert.False(t, found)
	assert.Equal(t, eventstore.AppendResult{}, r)
	r, found = CombineCommandResults(at(2, 3, 9), true, eventstore.AppendResult{}, false)
	assert.True(t, found)
	assert.Equal(t, at(2, 3, 9), r, "found by the first lookup only")
	r, found = CombineCommandResults(eventstore.AppendResult{}, false, at(4, 6, 12), true)
	assert.True(t, found)
	assert.Equal(t, at(4, 6, 12), r, "found by the second lookup only")
	r, _ = CombineCommandResults(at(4, 6, 12), true, at(1, 1, 3), true)
	assert.Equal(t, at(1, 6, 12), r, "all of the command's events, whichever lookup found the later part")
	r, _ = CombineCommandResults(at(1, 1, 3), true, at(4, 6, 12), true)
	assert.Equal(t, at(1, 6, 12), r)
}
