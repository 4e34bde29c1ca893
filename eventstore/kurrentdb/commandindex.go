package kurrentdb

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// CommandResult implements [storekit.CommandIndex]: what command commandID
// appended to stream, so that the command bus recognizes a redelivered
// command without scanning the stream.
//
// KurrentDB indexes no metadata, so the store keeps the index itself, in
// the cache its repeat checks read (see [Options.RepeatStreams]): the first
// look-up of a stream in a process reads the stream once, and every later
// one reads only the events appended since, then the one event whose
// position the answer carries. A stream the cache has forgotten is read
// again whole.
func (s *Store) CommandResult(ctx context.Context, stream, commandID string) (eventstore.AppendResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	ask, err := storekit.CheckCommandLookup(stream, commandID)
	if err != nil || !ask {
		return eventstore.AppendResult{}, false, err
	}
	if isState(stream) {
		return eventstore.AppendResult{}, false, nil
	}
	e := s.repeats.entry(stream)
	e.mu.Lock()
	err = s.catchUp(ctx, stream, e)
	span, found := e.commands[commandID]
	e.mu.Unlock()
	if err != nil || !found {
		return eventstore.AppendResult{}, false, err
	}
	rec, err := s.eventAt(ctx, stream, span[1])
	if err != nil {
		return eventstore.AppendResult{}, false, err
	}
	return eventstore.AppendResult{FirstVersion: span[0], LastVersion: span[1], Position: position(rec), Duplicate: true}, true, nil
}
