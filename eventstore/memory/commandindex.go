package memory

import (
	"context"

	"github.com/cairn-es/cairn/eventstore"
)

var _ eventstore.CommandIndex = (*Store)(nil)

// EventsByCommand implements [eventstore.CommandIndex]. The memory store
// keeps no index by command ID, so it compares the command IDs of the
// stream's events in place, newest first (a redelivery is usually recent);
// it copies only the matches.
func (s *Store) EventsByCommand(ctx context.Context, stream, commandID string) ([]eventstore.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := eventstore.ValidateStream(stream); err != nil {
		return nil, err
	}
	if commandID == "" {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, eventstore.ErrClosed
	}
	st := s.streams[stream]
	if st == nil {
		return nil, nil
	}
	var out []eventstore.Event
	for v := len(st.entries) - 1; v >= 0; v-- {
		if s.log[st.entries[v]].Metadata.CommandID == commandID {
			out = append(out, s.copyOf(st.entries[v]))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
