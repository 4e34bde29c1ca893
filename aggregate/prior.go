package aggregate

import (
	"context"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
	"github.com/cairn-es/cairn/internal/busrepo"
)

// priorOutcome is [busrepo.Repo.PriorOutcome]: the outcome of command
// commandID in inst's stream, looked for without a bound.
func (r *Repository[T, PT]) priorOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (busrepo.Outcome, bool, error) {
	out, found, _, err := r.lookup(ctx, inst, commandID, 0)
	return out, found, err
}

// recentOutcome is [busrepo.Repo.RecentOutcome]: priorOutcome with the
// scan of a store without a command index bounded by
// [RepositoryOptions.ScanLimit].
func (r *Repository[T, PT]) recentOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (out busrepo.Outcome, found, certain bool, err error) {
	return r.lookup(ctx, inst, commandID, r.scanLimit)
}

// lookup finds the outcome of command commandID, scanning at most limit
// events of a store without a command index (zero: no limit).
func (r *Repository[T, PT]) lookup(ctx context.Context, inst *Instance[T, PT], commandID string, limit int) (out busrepo.Outcome, found, certain bool, err error) {
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
		// Another command's ID has the same hash: ask the store.
		return r.findOutcome(ctx, inst.Stream, inst.Version+1, commandID, limit)
	}
	if inst.base == 0 {
		return busrepo.Outcome{}, false, true, nil
	}
	return r.findOutcome(ctx, inst.Stream, inst.base, commandID, limit)
}

// findOutcome finds and reads the outcome of command commandID among the
// events of stream below version base.
func (r *Repository[T, PT]) findOutcome(ctx context.Context, stream string, base uint64, commandID string, limit int) (busrepo.Outcome, bool, bool, error) {
	s, found, certain, err := r.findBefore(ctx, stream, base, commandID, limit)
	if err != nil || !found {
		return busrepo.Outcome{}, false, certain, err
	}
	out, found, err := r.readOutcome(ctx, stream, commandID, s)
	return out, found, true, err
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
// below base. Without a command index it scans backward, and gives up
// (certain false) after limit events that are not the command's, when
// limit is positive.
func (r *Repository[T, PT]) findBefore(ctx context.Context, stream string, base uint64, commandID string, limit int) (s span, found, certain bool, err error) {
	if idx, ok := r.store.(storekit.CommandIndex); ok {
		r, found, err := idx.CommandResult(ctx, stream, commandID)
		if err != nil || !found {
			return span{}, false, true, err
		}
		return span{first: r.FirstVersion, last: r.LastVersion}, true, true, nil
	}
	scanned := 0
	for e, err := range r.store.ReadStream(ctx, stream, eventstore.Backward(base-1)) {
		if err != nil {
			return span{}, false, false, err
		}
		if e.Metadata.CommandID != commandID {
			if found {
				break // one command's events are consecutive: one append
			}
			if scanned++; limit > 0 && scanned >= limit && e.Version > 0 {
				return span{}, false, false, nil
			}
			continue
		}
		if !found {
			s.last = e.Version
		}
		s.first, found = e.Version, true
	}
	return s, found, true, nil
}
