package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// pending holds the consumer's dead letters whose events come after the
// position it resumes from, by event: the IDs of their parked parts.
//
// Such a dead letter was parked by a run whose checkpoint never passed its
// event: a crash or a lost lease between parking and the checkpoint move
// (a plain consumer, or dead letters kept in another store than the
// checkpoint), a rebuild that moved the checkpoint back, or a version of
// Cairn that parked outside the checkpoint's transaction. The consumer
// handles those events again. If it then succeeds, the dead letter must go
// in the same step, or a retry would apply the event a second time; if it
// fails again, parking updates the same dead letter.
type pending map[eventKey]map[int]string

// eventKey identifies a stored event as dead letters key it: event IDs are
// unique per stream only.
type eventKey struct {
	stream string
	id     uuid.UUID
}

func keyOf(e eventstore.Event) eventKey { return eventKey{stream: e.StreamID, id: e.ID} }

// pendingLetters reads the consumer's dead letters of events after from.
// It lists them all: dead letters are few, and this runs once each time the
// consumer starts reading.
func (c *Consumer) pendingLetters(ctx context.Context, from eventstore.Position) (pending, error) {
	if c.opts.DeadLetters == nil {
		return nil, nil
	}
	var p pending
	for d, err := range c.opts.DeadLetters.DeadLetters(ctx, c.name) {
		if err != nil {
			return nil, fmt.Errorf("consumer %q: reading the dead letters after %s: %w", c.name, from, err)
		}
		if !from.Before(d.Event.Position) {
			continue
		}
		if p == nil {
			p = make(pending)
		}
		k := keyOf(d.Event)
		if p[k] == nil {
			p[k] = make(map[int]string)
		}
		p[k][d.Part] = d.ID
	}
	return p, nil
}

// resolve deletes, through s, the dead letters of u's parts that were not
// given up this time (given holds those). A transactional consumer calls it
// after the checkpoint's compare-and-set passed: in the transaction when
// the dead letters live in its store; otherwise just before the commit, so
// that a failed commit leaves the event to be handled again, and never a
// dead letter of an event that was handled. One already gone (skipped or
// retried meanwhile) is no error.
func (p pending) resolve(s step, u unit, given map[int]*failure) error {
	for part, id := range p[keyOf(u.ev)] {
		if given[part] != nil {
			continue
		}
		if err := s.resolve(id); err != nil && !errors.Is(err, eventstore.ErrDeadLetterNotFound) {
			return err
		}
	}
	return nil
}

// handled forgets u's dead letters once its handling is committed.
func (p pending) handled(u unit) {
	if len(p) > 0 {
		delete(p, keyOf(u.ev))
	}
}
