package aggregate

import (
	"context"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// PriorOutcome returns what command commandID did to inst's aggregate
// before, and true; or false when it produced no events there.
//
// It answers from the instance when it can: it remembers the commands of
// the events it replayed or saved. For the events before those (below a
// snapshot, or forgotten on a very hot aggregate) it asks the store's
// [eventstore.CommandIndex] when the store has one, and otherwise scans the
// stream backward from there, reading metadata only. The events are read
// again and decoded, so a duplicate's outcome is the same values the first
// dispatch returned (after upcasting).
func (r *Repository[T, PT]) PriorOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (Outcome, bool, error) {
	if commandID == "" || !inst.Exists {
		return Outcome{}, false, nil
	}
	if first, ok := inst.remembers(commandID); ok {
		out, found, err := r.readOutcome(ctx, inst.Stream, commandID, span{first: first, last: eventstore.End})
		if err != nil || found {
			return out, found, err
		}
		// Another command's ID has the same hash: ask the store.
		return r.findOutcome(ctx, inst.Stream, inst.Version+1, commandID)
	}
	if inst.base == 0 {
		return Outcome{}, false, nil
	}
	return r.findOutcome(ctx, inst.Stream, inst.base, commandID)
}

// findOutcome finds and reads the outcome of command commandID among the
// events of stream below version base.
func (r *Repository[T, PT]) findOutcome(ctx context.Context, stream string, base uint64, commandID string) (Outcome, bool, error) {
	s, found, err := r.findBefore(ctx, stream, base, commandID)
	if err != nil || !found {
		return Outcome{}, false, err
	}
	return r.readOutcome(ctx, stream, commandID, s)
}

// readOutcome reads and decodes the events of command commandID, from
// version s.first for as long as they carry its ID, up to s.last.
func (r *Repository[T, PT]) readOutcome(ctx context.Context, stream, commandID string, s span) (Outcome, bool, error) {
	out := Outcome{FirstVersion: s.first, Duplicate: true}
	found := false
	var buf []codec.Decoded
	for e, err := range r.store.ReadStream(ctx, stream, eventstore.Forward(s.first)) {
		if err != nil {
			return Outcome{}, false, err
		}
		if e.Version > s.last || e.Metadata.CommandID != commandID {
			break
		}
		if buf, err = r.reg.DecodeAppend(buf[:0], e); err != nil {
			return Outcome{}, false, err
		}
		for _, d := range buf {
			out.Events = append(out.Events, d.Value)
		}
		out.LastVersion, found = e.Version, true
	}
	return out, found, nil
}

// findBefore finds the events of command commandID in stream at versions
// below base.
func (r *Repository[T, PT]) findBefore(ctx context.Context, stream string, base uint64, commandID string) (span, bool, error) {
	if idx, ok := r.store.(eventstore.CommandIndex); ok {
		r, found, err := idx.CommandResult(ctx, stream, commandID)
		if err != nil || !found {
			return span{}, false, err
		}
		return span{first: r.FirstVersion, last: r.LastVersion}, true, nil
	}
	var s span
	found := false
	for e, err := range r.store.ReadStream(ctx, stream, eventstore.Backward(base-1)) {
		if err != nil {
			return span{}, false, err
		}
		if e.Metadata.CommandID != commandID {
			if found {
				break // one command's events are consecutive: one append
			}
			continue
		}
		if !found {
			s.last = e.Version
		}
		s.first, found = e.Version, true
	}
	return s, found, nil
}
