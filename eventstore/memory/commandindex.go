package memory

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// CommandResult implements [storekit.CommandIndex]. The memory store
// keeps no index by command ID (that would need a field in [Store]), so it
// compares the command IDs of the stream's events in place, newest first,
// without copying them: a redelivery is usually recent.
func (s *Store) CommandResult(ctx context.Context, stream, commandID string) (eventstore.AppendResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	if ask, err := storekit.CheckCommandLookup(stream, commandID); !ask {
		return eventstore.AppendResult{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return eventstore.AppendResult{}, false, eventstore.ErrClosed
	}
	st := s.streams.get(stream)
	if st == nil {
		return eventstore.AppendResult{}, false, nil
	}
	var r eventstore.AppendResult
	found := false
	for v := len(st.entries) - 1; v >= 0; v-- {
		e := s.log.at(st.entries[v])
		if e.Metadata.CommandID != commandID {
			if found {
				break // one command's events are consecutive
			}
			continue
		}
		if !found {
			r = eventstore.AppendResult{LastVersion: e.Version, Position: e.Position, Duplicate: true}
			found = true
		}
		r.FirstVersion = e.Version
	}
	return r, found, nil
}
