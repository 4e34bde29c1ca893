package projection

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
)

// pending holds the keys of the consumer's dead letters whose events come
// after the position it resumes from, by event: the IDs of their parked
// parts.
//
// Such a dead letter was parked by a run whose checkpoint never passed its
// event: a crash or a lost lease between parking and the checkpoint move
// (a plain consumer, or dead letters kept in another store than the
// checkpoint), another deployment's transaction that parked it and then
// failed, a rebuild that moved the checkpoint back, or a version of Cairn
// that parked outside the checkpoint's transaction. The consumer handles
// those events again. If it then succeeds, the dead letter must go in the
// same step, or a retry would apply the event a second time; if it fails
// again, parking updates the same dead letter.
type pending map[eventKey]map[int]string

// eventKey identifies a stored event as dead letters key it: event IDs are
// unique per stream only.
type eventKey struct {
	stream string
	id     uuid.UUID
}

func keyOf(e eventstore.Event) eventKey { return eventKey{stream: e.StreamID, id: e.ID} }

// beyond is after every position: a session's dead letters are those of
// every event after its checkpoint.
var beyond = eventstore.Position{Major: math.MaxUint64, Minor: math.MaxUint64}

// pendingLetters reads the keys of the consumer's dead letters of events
// after from, and nothing of the others: a session needs no more, and
// reads no payload (a start beside many dead letters that it has passed
// costs nothing).
func (c *Consumer) pendingLetters(ctx context.Context, from eventstore.Position) (pending, error) {
	if c.opts.DeadLetters == nil {
		return nil, nil
	}
	p := make(pending)
	return p, c.addLetters(ctx, p, from, beyond)
}

// addLetters adds to p the keys of the consumer's dead letters of events
// after after and not after through.
func (c *Consumer) addLetters(ctx context.Context, p pending, after, through eventstore.Position) error {
	for k, err := range c.opts.DeadLetters.DeadLetterKeys(ctx, c.name, after, through) {
		if err != nil {
			return fmt.Errorf("consumer %q: reading the dead letters after %s: %w", c.name, after, err)
		}
		e := eventKey{stream: k.Stream, id: k.EventID}
		if p[e] == nil {
			p[e] = make(map[int]string)
		}
		p[e][k.Part] = k.ID
	}
	return nil
}

// refresh adds to p, in a transactional batch of events after from up to
// through, once its checkpoint's compare-and-set has passed, the dead
// letters that another deployment parked for them since the session
// began. Only a consumer whose dead letters live in another store than the
// checkpoint's needs it: a deployment running without a lease parks there
// from inside its transaction, commits that park apart, and may then fail
// to commit the transaction; the compare-and-set waits for that
// transaction to end (the checkpoint's row lock, SQLite's one writer), so
// its dead letter is seen here, and resolved if this handling succeeds.
// Elsewhere a dead letter after the checkpoint commits with the checkpoint
// past it, or is parked at once by a plain consumer, whose effects are at
// least once anyway.
func (c *Consumer) refresh(ctx context.Context, p pending, from, through eventstore.Position) error {
	if !c.exec.transactional() || c.exec.ownsLetters() || p == nil {
		return nil
	}
	return c.addLetters(ctx, p, from, through)
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
