package aggregate

import (
	"context"
	"hash/maphash"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// rememberedCommands is how many commands an instance remembers: the most
// recent ones, by a hash of their ID and the version of their first event,
// 16 bytes each, so 16 KiB per instance at most and 16 MiB for a bus's
// default 1,024 cached instances. Redeliveries are usually recent, and these
// are answered from memory. A command the instance has forgotten (or never
// saw, below its snapshot) is asked of the store (see
// [Repository.priorOutcome]): forgetting costs a lookup, never a wrong
// answer. A larger number would only spare that lookup for older
// redeliveries, at 16 bytes per command per cached instance.
const rememberedCommands = 1024

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

	typ *Type[T, PT]

	// commands remembers the commands of the events at versions >= base:
	// a ring of the last rememberedCommands, oldest at next once full.
	// Hashes keep a hot aggregate's memory small; a collision is caught
	// when the events are read (their command ID differs) and then the
	// store is asked. An ID absent from it may still be recorded before
	// base.
	commands []remembered
	next     int
	base     uint64
	seed     maphash.Seed
	// sinceSnapshot counts events applied since the state was last
	// snapshotted or restored from a snapshot.
	sinceSnapshot uint64
}

// remembered is one command an instance remembers: the hash of its ID and
// the version of its first event.
type remembered struct{ hash, first uint64 }

// span is the versions of the events that one command produced: one append,
// so consecutive.
type span struct{ first, last uint64 }

func (i *Instance[T, PT]) hash(commandID string) uint64 { return maphash.String(i.seed, commandID) }

// expected returns the expected version for appending to the instance's
// stream: the instance's own version.
func (i *Instance[T, PT]) expected() eventstore.ExpectedVersion {
	return storekit.StreamState(i.Version, i.Exists)
}

// Handle lets the instance decide cmd (see [Type.Handle]), turning a panic
// into a [*PanicError] naming the instance's stream. The handler's own
// error is returned unchanged. The events it returns are what
// [Repository.Save] takes.
func (i *Instance[T, PT]) Handle(ctx context.Context, cmd any) (events []any, err error) {
	if err := checkInstance(i); err != nil {
		return nil, err
	}
	return i.typ.handle(ctx, i.Stream, i.State, cmd)
}

// apply applies one decoded event (see [Type.Apply]).
func (i *Instance[T, PT]) apply(event any) error {
	return i.typ.apply(i.Stream, i.State, event)
}

// track records that the event at version v was produced by command id.
// Events arrive in version order, so a command's later events follow its
// first: only the newest entry can be the same command.
func (i *Instance[T, PT]) track(id string, v uint64) {
	if id == "" {
		return
	}
	h := i.hash(id)
	n := len(i.commands)
	if n > 0 && i.commands[(i.next+n-1)%n].hash == h {
		return // a later event of the same command, or a collision
	}
	if n < rememberedCommands {
		if n == cap(i.commands) { // grow as append would, but never past the bound
			grown := make([]remembered, n, min(max(2*n, 8), rememberedCommands))
			copy(grown, i.commands)
			i.commands = grown
		}
		i.commands = append(i.commands, remembered{hash: h, first: v})
		return
	}
	i.commands[i.next] = remembered{hash: h, first: v}
	i.next = (i.next + 1) % n
	i.base = i.commands[i.next].first // the versions before it are forgotten
}

// remembers returns the version of the first event of command id, newest
// first, and whether the instance remembers one.
func (i *Instance[T, PT]) remembers(id string) (uint64, bool) {
	h := i.hash(id)
	n := len(i.commands)
	for k := n; k > 0; k-- {
		if c := i.commands[(i.next+k-1)%n]; c.hash == h {
			return c.first, true
		}
	}
	return 0, false
}
