package aggregate

import (
	"context"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
)

// priorOutcome is [busrepo.Repo.PriorOutcome]: the outcome of command
// commandID in inst's stream, exactly: what the instance cannot answer for
// (recentOutcome) is asked of the store.
func (r *Repository[T, PT]) priorOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (busrepo.Outcome, bool, error) {
	out, found, certain, err := r.recentOutcome(ctx, inst, commandID)
	if err != nil || found || certain {
		return out, found, err
	}
	base := inst.base
	if _, collided := inst.remembers(commandID); collided {
		base = inst.Version + 1 // another command's ID has the same hash: the whole stream
	}
	s, found, err := r.findBefore(ctx, inst.Stream, base, commandID)
	if err != nil || !found {
		return busrepo.Outcome{}, false, err
	}
	return r.readOutcome(ctx, inst.Stream, commandID, s)
}

// recentOutcome is [busrepo.Repo.RecentOutcome]: the outcome of a command
// the instance remembers, without asking the store about the others.
//
// A command the instance cannot answer for (its events would lie below
// what it remembers: it was loaded from a snapshot, or has more commands
// than it remembers) is reported as not found and not certain. That costs
// nothing on the way of a new command, which is what such a command almost
// always is: should it be an old one after all, the append of its decision
// is refused, for the store finds the command's event IDs anywhere in the
// stream (the eventstore.Store contract, which storetest checks), and the
// bus then asks priorOutcome; a decision that appends nothing is never
// returned before priorOutcome has said the command is new.
func (r *Repository[T, PT]) recentOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (out busrepo.Outcome, found, certain bool, err error) {
	if err := checkInstance(inst); err != nil {
		return busrepo.Outcome{}, false, false, err
	}
	if commandID == "" || !inst.Exists {
		return busrepo.Outcome{}, false, true, nil
	}
	if first, ok := inst.remembers(commandID); ok {
		out, found, err := r.readOutcome(ctx, inst.Stream, commandID, span{first: first, last: eventstore.End})
		if err != nil || found {
			return out, found, true, err
		}
		return busrepo.Outcome{}, false, false, nil // a hash collision: only the store can tell
	}
	return busrepo.Outcome{}, false, inst.base == 0, nil
}

// readOutcome reads and decodes the events of command commandID, from
// version s.first for as long as they carry its ID, up to s.last.
func (r *Repository[T, PT]) readOutcome(ctx context.Context, stream, commandID string, s span) (busrepo.Outcome, bool, error) {
	out := busrepo.Outcome{FirstVersion: s.first, Duplicate: true}
	found := false
	var buf []codec.Decoded
	for e, err := range r.store.ReadStream(ctx, stream, eventstore.Forward(s.first)) {
		if err != nil {
			return busrepo.Outcome{}, false, err
		}
		if e.Version > s.last || e.Metadata.CommandID != commandID {
			break
		}
		if e.Version == s.first {
			out.Origin = e.Metadata.Extra
		}
		if out.CommandType == "" {
			out.CommandType = e.Metadata.Extra[busrepo.CommandTypeKey]
		}
		if busrepo.IsRejection(&e) {
			// A recorded rejection is the command's one event.
			rej, err := busrepo.DecodeRejection(&e)
			if err != nil {
				return busrepo.Outcome{}, false, err
			}
			out.Rejection, out.LastVersion, out.Position = &rej, e.Version, e.Position
			return out, true, nil
		}
		if buf, err = r.reg.DecodeAppend(buf[:0], e); err != nil {
			return busrepo.Outcome{}, false, err
		}
		for _, d := range buf {
			out.Events = append(out.Events, d.Value)
		}
		out.LastVersion, out.Position, found = e.Version, e.Position, true
	}
	return out, found, nil
}

// findBefore finds the events of command commandID in stream at versions
// below base: through the store's command index, or else by a backward
// scan, down to the stream's first event when the command is not there.
func (r *Repository[T, PT]) findBefore(ctx context.Context, stream string, base uint64, commandID string) (s span, found bool, err error) {
	if idx, ok := r.store.(storekit.CommandIndex); ok {
		r, found, err := idx.CommandResult(ctx, stream, commandID)
		if err != nil || !found {
			return span{}, false, err
		}
		return span{first: r.FirstVersion, last: r.LastVersion}, true, nil
	}
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
