package commandtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-es/cairn/command"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/check"
)

var snapshotTests = []test{
	{"TakenEveryN", testSnapshotTaken},
	{"Used", testSnapshotUsed},
	{"FallbackToReplay", testSnapshotFallback},
}

func (e *env) increments(b *command.Bus, id string, n int) {
	e.t.Helper()
	for range n {
		e.seq++
		_, err := b.Dispatch(context.Background(), command.Message{ID: fmt.Sprint(e.prefix, id, "-", e.seq), Command: Increment{ID: id}})
		check.NoError(e.t, err)
	}
}

func (e *env) snapshot(id string) (storekit.Snapshot, bool) {
	e.t.Helper()
	snap, ok, err := e.snaps.LoadSnapshot(context.Background(), "counter-"+id)
	check.NoError(e.t, err)
	return snap, ok
}

func testSnapshotTaken(t testing.TB, e *env) {
	id := e.id("every")
	b := e.bus(command.Options{}, 10)
	e.increments(b, id, 9)
	_, ok := e.snapshot(id)
	check.True(t, !ok, "no snapshot before 10 events")
	e.increments(b, id, 16)
	snap, ok := e.snapshot(id)
	check.True(t, ok)
	check.Equal(t, snap.Version, uint64(19), "taken after the 10th and 20th events")
	check.Equal(t, snap.Type, "counter.state")
	check.Equal(t, snap.SchemaVersion, uint32(2))

	// A stream that grew without snapshots gets one when it is loaded.
	id2 := e.id("late")
	e.increments(e.bus(command.Options{}, 0), id2, 25)
	_, ok = e.snapshot(id2)
	check.True(t, !ok)
	e.increments(e.bus(command.Options{}, 10), id2, 1)
	snap, ok = e.snapshot(id2)
	check.True(t, ok)
	check.Equal(t, snap.Version, uint64(24), "saved after the replay, before the new event")
}

// testSnapshotUsed plants a snapshot whose state no replay could build:
// a cold bus must start from it and apply only the tail.
func testSnapshotUsed(t testing.TB, e *env) {
	id := e.id("used")
	e.increments(e.bus(command.Options{}, 0), id, 10)
	e.plant(id, 4, `{"id":"`+id+`","count":1000,"applied":0}`, 2)
	res, err := e.bus(command.Options{NoCache: true}, 100).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
	check.NoError(t, err)
	check.Equal(t, res.Version, uint64(10))
	st := e.loadVia(id)
	check.Equal(t, st.Count, 1006, "snapshot state plus the 6 events after it")
	check.Equal(t, st.Applied, 6)
}

func (e *env) plant(id string, version uint64, data string, schema uint32) {
	e.t.Helper()
	check.NoError(e.t, e.snaps.SaveSnapshot(context.Background(), storekit.Snapshot{
		Stream: "counter-" + id, Version: version, Type: "counter.state", SchemaVersion: schema, Data: []byte(data),
	}))
}

func testSnapshotFallback(t testing.TB, e *env) {
	cases := []struct {
		name    string
		version uint64
		data    string
		schema  uint32
		typ     string
	}{
		{"Undecodable", 4, `{"count":`, 2, "counter.state"},
		{"SchemaTooNew", 4, `{"count":1000}`, 3, "counter.state"},
		{"SchemaWithoutUpcastPath", 4, `{"count":1000}`, 1, "counter.state"},
		{"AnotherType", 4, `{"by":1000}`, 1, "counter.incremented"},
		{"UnknownType", 4, `{"count":1000}`, 1, "nobody.knows"},
		{"PastTheEnd", 40, `{"count":1000}`, 2, "counter.state"},
	}
	for _, tc := range cases {
		check.Run(t, tc.name, func(t testing.TB) {
			id := e.id("fb" + tc.name)
			e.increments(e.bus(command.Options{}, 0), id, 10)
			check.NoError(t, e.snaps.SaveSnapshot(context.Background(), storekit.Snapshot{
				Stream: "counter-" + id, Version: tc.version, Type: tc.typ, SchemaVersion: tc.schema, Data: []byte(tc.data),
			}))
			res, err := e.bus(command.Options{NoCache: true}, 1000).Dispatch(context.Background(), command.Message{Command: Increment{ID: id}})
			check.NoError(t, err, "an untrustworthy snapshot must not fail the command")
			check.Equal(t, res.Version, uint64(10))
			st := e.loadVia(id)
			check.Equal(t, st.Count, 11, "full replay, not the snapshot's state")
			check.Equal(t, st.Applied, 11)
		})
	}
}
