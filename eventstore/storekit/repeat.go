package storekit

import (
	"math"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// Repeat is what a store knows about an append whose event IDs it already
// holds: the stream versions at which it found them.
type Repeat struct {
	// Stored maps each event ID of the append that the stream already holds
	// to its stream version. Stores look up only the append's own IDs.
	Stored map[uuid.UUID]uint64
	// Current is the stream's state: [eventstore.NoStream] or its last version.
	Current eventstore.ExpectedVersion
}

// CheckRepeat decides what an append means when the stream already holds
// some of its event IDs. It returns found false when the stream holds none of
// them (the append proceeds as usual); found true with the version of the
// first event when it holds all of them, in order, at consecutive versions,
// at the place the expected version names (the append is a repeat: write
// nothing and report a duplicate); or an [*eventstore.EventIDConflictError] otherwise:
// for a partial repeat, and for an exact repeat that the expected version
// puts at another place (Displaced set).
func CheckRepeat(stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData, r Repeat) (first uint64, found bool, err error) {
	if len(r.Stored) == 0 {
		return 0, false, nil
	}
	first, ok := r.Stored[events[0].ID]
	for i := 1; ok && i < len(events); i++ {
		v, held := r.Stored[events[i].ID]
		ok = held && v == first+uint64(i)
	}
	if !ok {
		for i, e := range events {
			if v, held := r.Stored[e.ID]; held {
				return 0, false, &eventstore.EventIDConflictError{Stream: stream, EventID: e.ID, Index: i, StoredVersion: v}
			}
		}
	}
	if !repeatFits(expected, first) {
		return 0, false, &eventstore.EventIDConflictError{Stream: stream, EventID: events[0].ID, Index: 0, StoredVersion: first,
			Displaced: true, Expected: expected}
	}
	return first, true, nil
}

// repeatFits reports whether an append with expected version e would have
// written its first event at version first.
func repeatFits(e eventstore.ExpectedVersion, first uint64) bool {
	switch {
	case e.IsNoStream():
		return first == 0
	case e.IsStreamExists():
		return first > 0
	default:
		v, exact := e.Version()
		return !exact || v < math.MaxUint64 && v+1 == first // the last version has no next one
	}
}

// StreamState returns the ExpectedVersion that describes a stream whose
// last event has version last, or [eventstore.NoStream] when exists is false. Stores
// use it to report the actual state in a [*eventstore.WrongVersionError].
func StreamState(last uint64, exists bool) eventstore.ExpectedVersion {
	if !exists {
		return eventstore.NoStream
	}
	return eventstore.Exact(last)
}
