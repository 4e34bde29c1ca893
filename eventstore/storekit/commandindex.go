package storekit

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/names"
)

// CommandIndex is an optional capability of a [eventstore.Store]: finding what one
// command appended to a stream, by the [eventstore.Metadata.CommandID] its events
// carry, without reading the stream. The command bus uses it to recognize a
// redelivered command whose events are older than the snapshot it loaded
// from; a store without it is scanned instead.
type CommandIndex interface {
	// CommandResult reports what command commandID appended to stream: the
	// versions of its first and last events and the position of the last,
	// with Duplicate set, and found true; or found false when the stream
	// holds no event of that command (or commandID is empty). It may assume
	// that one command's events were appended together, at consecutive
	// versions, as the command bus appends them.
	CommandResult(ctx context.Context, stream, commandID string) (r eventstore.AppendResult, found bool, err error)
}

// CheckCommandLookup checks the arguments of [CommandIndex.CommandResult]
// as every store does first: a stream name that is not valid is an
// [*eventstore.InvalidArgumentError]; ask is false when no event can carry commandID
// (it is empty, or not valid UTF-8 without NUL bytes, which no store
// holds), so that the answer is "not found" without asking the store.
func CheckCommandLookup(stream, commandID string) (ask bool, err error) {
	if err := ValidateStream(stream); err != nil {
		return false, err
	}
	return commandID != "" && names.StorableText(commandID), nil
}

// CombineCommandResults is what a store answers for a command that two of
// its lookups may each have found part of: a store that finds the command
// bus's appends by their first event's ID (see [CommandIDsDerived]) and
// other commands by an index asks both, and answers for all of the
// command's events: the lowest first version, the highest last version
// and the latest position. Only a command appended apart, which
// the bus never does, is found by both.
func CombineCommandResults(a eventstore.AppendResult, aFound bool, b eventstore.AppendResult, bFound bool) (eventstore.AppendResult, bool) {
	switch {
	case !bFound:
		return a, aFound
	case !aFound:
		return b, true
	}
	a.FirstVersion, a.LastVersion = min(a.FirstVersion, b.FirstVersion), max(a.LastVersion, b.LastVersion)
	if a.Position.Before(b.Position) {
		a.Position = b.Position
	}
	return a, true
}
