package projection

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cairn-es/cairn/eventstore"
)

// ErrNoDeadLetterStore is returned by the dead-letter methods of a consumer
// that has no dead letter store.
var ErrNoDeadLetterStore = errors.New("projection: consumer has no dead letter store")

// DeadLetters yields the consumer's dead letters, oldest first.
func (c *Consumer) DeadLetters(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error] {
	if c.opts.DeadLetters == nil {
		return func(yield func(eventstore.DeadLetter, error) bool) {
			yield(eventstore.DeadLetter{}, ErrNoDeadLetterStore)
		}
	}
	return c.opts.DeadLetters.DeadLetters(ctx, c.name)
}

// RetryDeadLetter runs the handler once more on a parked event (the part
// that failed), outside the normal order: the events after it have already
// been handled. On success the dead letter is deleted (for a transactional
// consumer whose dead letters live in its store, in the same transaction as
// the effect). On failure it stays parked with one more attempt, its error
// and last failure updated, and RetryDeadLetter returns a [*HandlerError].
//
// The event is decoded again with the current registry, so a dead letter
// that failed to decode can be retried after an upcaster is deployed.
func (c *Consumer) RetryDeadLetter(ctx context.Context, id string) error {
	if c.opts.DeadLetters == nil {
		return ErrNoDeadLetterStore
	}
	d, err := c.opts.DeadLetters.DeadLetter(ctx, c.name, id)
	if err != nil {
		return err
	}
	parts, err := c.reg.Decode(d.Event)
	if err == nil && d.Part >= len(parts) {
		err = fmt.Errorf("%w: the event now decodes to %d values, and the parked part is %d",
			eventstore.ErrInvalidArgument, len(parts), d.Part)
	}
	if err == nil {
		err = c.exec.run(ctx, func(s step) error {
			if err := s.apply(parts[d.Part]); err != nil {
				return &partError{part: d.Part, err: err}
			}
			return s.resolve(id)
		})
		var pe *partError
		if !errors.As(err, &pe) {
			return err // nil, or a store error: the dead letter is unchanged
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.Attempts++
	d.LastFailure = time.Now().UTC()
	d.Error = err.Error()
	if _, perr := c.opts.DeadLetters.ParkDeadLetter(ctx, d); perr != nil {
		err = errors.Join(err, perr)
	}
	return &HandlerError{Consumer: c.name, Stream: d.Event.StreamID, Version: d.Event.Version, Position: d.Event.Position,
		Type: d.Event.Type, Part: d.Part, Attempts: d.Attempts, Err: err}
}

// SkipDeadLetter discards a dead letter without handling it.
func (c *Consumer) SkipDeadLetter(ctx context.Context, id string) error {
	if c.opts.DeadLetters == nil {
		return ErrNoDeadLetterStore
	}
	return c.opts.DeadLetters.DeleteDeadLetter(ctx, c.name, id)
}
