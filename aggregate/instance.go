package aggregate

import (
	"context"
	"hash/maphash"
	"runtime/debug"

	"github.com/cairn-es/cairn/eventstore"
)

// maxTrackedCommands bounds the commands an instance remembers (16 bytes
// and a map slot each). Beyond it the instance forgets them and asks the
// store about older ones (see [Repository.PriorOutcome]).
const maxTrackedCommands = 1 << 20

// Instance is one loaded aggregate: its state and the version it was built
// to. It belongs to one goroutine at a time.
type Instance[T any, PT Root[T]] struct {
	// ID is the aggregate's ID and Stream its stream.
	ID, Stream string
	// State is the aggregate, with every event up to Version applied.
	State PT
	// Version is the version of the last event applied; meaningful only
	// when Exists.
	Version uint64
	// Exists reports whether the stream has events.
	Exists bool

	// commands maps the hashes of the command IDs of the events at versions
	// >= base to the version of each command's first event. Hashes keep a
	// hot aggregate's memory small; a collision is caught when the events
	// are read (their command ID differs) and then the store is asked. An
	// ID absent from it may still be recorded before base.
	commands map[uint64]uint64
	base     uint64
	seed     maphash.Seed
	// sinceSnapshot counts events applied since the state was last
	// snapshotted or restored from a snapshot.
	sinceSnapshot uint64
}

// span is the versions of the events that one command produced: one append,
// so consecutive.
type span struct{ first, last uint64 }

func (i *Instance[T, PT]) hash(commandID string) uint64 { return maphash.String(i.seed, commandID) }

// Expected returns the expected version for appending to the instance's
// stream: the instance's own version.
func (i *Instance[T, PT]) Expected() eventstore.ExpectedVersion {
	return eventstore.StreamState(i.Version, i.Exists)
}

// Handle calls the aggregate's Handle, turning a panic into a [*PanicError].
// The aggregate's own error is returned unchanged.
func (i *Instance[T, PT]) Handle(ctx context.Context, cmd any) (events []any, err error) {
	defer func() {
		if v := recover(); v != nil {
			events, err = nil, &PanicError{Stream: i.Stream, Method: "Handle", Value: v, Stack: debug.Stack()}
		}
	}()
	return i.State.Handle(ctx, cmd)
}

// apply applies one decoded event, turning a panic into a [*PanicError].
func (i *Instance[T, PT]) apply(event any) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Stream: i.Stream, Method: "Apply", Value: v, Stack: debug.Stack()}
		}
	}()
	return i.State.Apply(event)
}

// track records that the event at version v was produced by command id.
func (i *Instance[T, PT]) track(id string, v uint64) {
	if id == "" {
		return
	}
	h := i.hash(id)
	if _, ok := i.commands[h]; ok {
		return // a later event of the same command, or a collision
	}
	if i.commands == nil {
		i.commands = make(map[uint64]uint64)
	} else if len(i.commands) >= maxTrackedCommands {
		clear(i.commands)
		i.base = v
	}
	i.commands[h] = v
}
