package storekit

import (
	"crypto/sha1"
	"strconv"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// commandIDSpace is the UUIDv5 namespace of event IDs derived from command
// IDs. Changing it would make a bus of a new release re-append the events of
// a command that an old release appended just before a crash. (The URL
// names the package where it was first defined; it is a name, never
// fetched.)
var commandIDSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/cairn-es/cairn/aggregate/event-id/v1"))

// CommandEventID returns the ID of the index-th event that command
// commandID appends to stream, as Cairn's command bus and aggregate
// repository give it: a UUIDv5, the same on every retry and redelivery, so
// that a repeated append of one decision is absorbed by the store's
// idempotent re-append. A recorded rejection takes the ID of the command's
// first event (index 0).
//
// A store may use it to find a command's events by their first event's ID
// instead of by command ID (see [CommandIDsDerived]).
func CommandEventID(stream, commandID string, index int) uuid.UUID {
	// uuid.NewSHA1(commandIDSpace, name), computed on a stack buffer: it
	// is on every command's way, and the library's allocates three times.
	var buf [256]byte
	b := append(buf[:0], commandIDSpace[:]...)
	b = append(b, stream...)
	b = append(b, 0)
	b = append(b, commandID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	sum := sha1.Sum(b)
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = (id[6] & 0x0f) | 0x50 // version 5
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id
}

// CommandIDsDerived reports whether events, appended together to stream,
// are one command's events named as Cairn's command bus names them: all
// carry the same non-empty [eventstore.Metadata.CommandID], and the i-th
// has the ID [CommandEventID](stream, that command ID, i).
//
// Every append of the bus is such an append. A store with a
// [CommandIndex] can mark them when it writes them, find them by their
// first event's ID, and keep its command index to the other events that
// carry a command ID, which are rare: an index entry fewer for every
// command.
func CommandIDsDerived(stream string, events []eventstore.EventData) bool {
	if len(events) == 0 {
		return false
	}
	command := events[0].Metadata.CommandID
	if command == "" {
		return false
	}
	for i := range events {
		if events[i].Metadata.CommandID != command || events[i].ID != CommandEventID(stream, command, i) {
			return false
		}
	}
	return true
}
