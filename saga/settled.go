package saga

import (
	"context"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// maxSettled bounds the commands a record lists as settled; older ones
// are looked up in the instance's history (see settled.Below).
const maxSettled = 256

// settled are the commands of an instance whose final outcome it took: a
// rejection fed back (whether or not a handler ran), or an operator's skip
// of a command that kept failing. Each command is known by its own ID, so
// that rejections taken in any order are each taken once; the list is
// bounded, and what it forgot is below a horizon, where the instance's
// history is the answer.
type settled struct {
	Commands []settledCommand `json:"commands,omitempty"`
	// Below: a command sent by a record below this version may have
	// settled without being listed (the list forgot it, or a version 1
	// record did not list it); ask the history (see engine.settledBefore).
	Below uint64 `json:"below,omitempty"`
}

// settledCommand is one settled command: its ID and the version of the
// record that sent it.
type settledCommand struct {
	ID   string `json:"id"`
	Sent uint64 `json:"sent"`
}

// IsZero reports an empty set, which records leave out.
func (s settled) IsZero() bool { return len(s.Commands) == 0 && s.Below == 0 }

// has reports whether command id is listed as settled.
func (s settled) has(id string) bool {
	return slices.ContainsFunc(s.Commands, func(c settledCommand) bool { return c.ID == id })
}

// whole reports whether the list alone says if a command sent by record
// version sent has settled.
func (s settled) whole(sent uint64) bool { return sent >= s.Below }

// add lists command id, sent by record version sent, as settled. Past
// maxSettled it forgets the commands of the oldest sending records and
// raises the horizon over them.
func (s settled) add(id string, sent uint64) settled {
	if s.has(id) {
		return s
	}
	s.Commands = append(slices.Clone(s.Commands), settledCommand{ID: id, Sent: sent})
	if len(s.Commands) <= maxSettled {
		return s
	}
	slices.SortStableFunc(s.Commands, func(a, b settledCommand) int { return compareUint(a.Sent, b.Sent) })
	cut := s.Commands[len(s.Commands)-maxSettled-1].Sent
	s.Commands = slices.DeleteFunc(s.Commands, func(c settledCommand) bool { return c.Sent <= cut })
	s.Below = max(s.Below, cut+1)
	return s
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isSettled reports whether command id, sent by record version sent of
// instance in, settled before: by the record's list, or, below the list's
// horizon, by the instance's history.
func (e *engine[S]) isSettled(ctx context.Context, in *instance[S], id string, sent uint64) (bool, error) {
	return e.settledCheck(ctx, in)(id, sent)
}

// settledCheck returns a function that tells whether a command of instance
// in, sent by record version sent, settled before; below the list's
// horizon it reads the instance's whole history, once, however many
// commands it is asked about.
func (e *engine[S]) settledCheck(ctx context.Context, in *instance[S]) func(id string, sent uint64) (bool, error) {
	r := &in.rec
	var history map[string]uint64 // command ID -> version of the step that settled it
	return func(id string, sent uint64) (bool, error) {
		if r.Settled.has(id) {
			return true, nil
		}
		if r.Settled.whole(sent) || !in.exists || e.store == nil {
			return false, nil // (a replay has no store, and replays steps that were taken)
		}
		if history == nil {
			var err error
			if history, err = e.settledIn(ctx, in, 0); err != nil {
				return false, err
			}
		}
		_, done := history[id]
		return done, nil
	}
}

// settledIn reads instance in's history from version from on, and returns
// the commands its steps settled, with the version of the step: the latest
// step that settled each counts, unless a later Redrive set the instance
// back to before that step.
func (e *engine[S]) settledIn(ctx context.Context, in *instance[S], from uint64) (map[string]uint64, error) {
	out := make(map[string]uint64)
	for ev, err := range e.store.ReadStream(ctx, in.stream, eventstore.Forward(from)) {
		if err != nil {
			return nil, err
		}
		if ev.Version > in.version {
			break
		}
		rec, err := decodeOutline(ev)
		if err != nil {
			return nil, err
		}
		h := rec.Handled
		switch {
		case settles(h, h.Message.Command):
			out[h.Message.Command] = ev.Version
		case h.Kind == kindRedriven:
			for id, at := range out {
				if at >= h.Message.Sequence {
					delete(out, id)
				}
			}
		}
	}
	return out, nil
}

// settles reports whether a step with cause c settled command id.
func settles(c cause, id string) bool {
	if c.Message.Command != id {
		return false
	}
	switch c.Kind {
	case kindRejected:
		return true
	case kindSkipped, kindReleased:
		k := c.Message.kind()
		return k == kindRejected || k == kindCommand
	}
	return false
}
