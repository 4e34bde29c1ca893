package aggregate

import (
	"context"
	"runtime/debug"

	"github.com/cairn-es/cairn/eventstore"
)

// maxTrackedCommands bounds the command IDs an instance remembers. Beyond
// it the instance forgets them and asks the store (see
// [Repository.PriorOutcome]), so a hot aggregate's memory stays flat.
const maxTrackedCommands = 1 << 16

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

	// commands maps the command IDs of the events at versions >= base to
	// the versions of their events; an ID absent from it may still be
	// recorded before base.
	commands map[string]span
	base     uint64
	// sinceSnapshot counts events applied since the state was last
	// snapshotted or restored from a snapshot.
	sinceSnapshot uint64
}

// span is the versions of the events that one command produced: one append,
// so consecutive.
type span struct{ first, last uint64 }

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
	if s, ok := i.commands[id]; ok {
		s.last = v
		i.commands[id] = s
		return
	}
	if i.commands == nil {
		i.commands = make(map[string]span)
	} else if len(i.commands) >= maxTrackedCommands {
		clear(i.commands)
		i.base = v
	}
	i.commands[id] = span{first: v, last: v}
}
