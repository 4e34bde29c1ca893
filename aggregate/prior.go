package aggregate

import (
	"context"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// PriorOutcome returns what command commandID did to inst's aggregate
// before, and true; or false when it produced no events there.
//
// It answers from the instance when it can: the command IDs of the events
// it replayed (or saved) are in memory. For the events before those (below
// a snapshot, or forgotten on a hot aggregate) it asks the store's
// [eventstore.CommandIndex] when the store has one, and otherwise scans the
// stream backward from there, reading metadata only. The events are read
// again and decoded, so a duplicate's outcome is the same values the first
// dispatch returned (after upcasting).
func (r *Repository[T, PT]) PriorOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (Outcome, bool, error) {
	if commandID == "" || !inst.Exists {
		return Outcome{}, false, nil
	}
	s, ok := inst.commands[commandID]
	if !ok && inst.base > 0 {
		var err error
		if s, ok, err = r.findBefore(ctx, inst.Stream, inst.base, commandID); err != nil {
			return Outcome{}, false, err
		}
	}
	if !ok {
		return Outcome{}, false, nil
	}
	out := Outcome{FirstVersion: s.first, LastVersion: s.last, Duplicate: true}
	var buf []codec.Decoded
	for e, err := range r.store.ReadStream(ctx, inst.Stream, eventstore.Forward(s.first)) {
		if err != nil {
			return Outcome{}, false, err
		}
		if e.Version > s.last {
			break
		}
		if buf, err = r.reg.DecodeAppend(buf[:0], e); err != nil {
			return Outcome{}, false, err
		}
		for _, d := range buf {
			out.Events = append(out.Events, d.Value)
		}
	}
	return out, true, nil
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
