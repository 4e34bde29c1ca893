package saga

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/eventstore/storekit"
)

// A stored event that cannot reach its instance (it does not decode, its
// mapping finds no instance, or the instance cannot take it: a record of
// its stream that cannot be read, a step the store refuses) waits as a
// dead letter of the runner's events consumer; a step record whose
// commands could not be sent for such a reason, as one of its outbox. Once
// the cause is repaired (an upcaster deployed, a damaged record mended),
// an operator hands them back, oldest first, or gives up on them.

// ErrNoDeadLetters is returned by the runner's dead letter operations when
// it has no dead letter store (see [RunnerOptions.DeadLetters]).
var ErrNoDeadLetters = errors.New("saga: the runner has no dead letter store")

// DeadLetters yields the runner's dead letters: those of its events
// consumers (the events that reach no instance are parked under
// "saga:<type>", see [Runner.Consumers]), then those of its outboxes, each consumer's
// oldest first.
func (r *Runner[S]) DeadLetters(ctx context.Context) iter.Seq2[eventstore.DeadLetter, error] {
	return func(yield func(eventstore.DeadLetter, error) bool) {
		if _, err := r.start(); err != nil {
			yield(eventstore.DeadLetter{}, err)
			return
		}
		if r.deadLetters == nil {
			yield(eventstore.DeadLetter{}, ErrNoDeadLetters)
			return
		}
		for _, consumer := range r.deadLetterConsumers() {
			for d, err := range r.deadLetters.DeadLetters(ctx, consumer) {
				if !yield(d, err) || err != nil {
					return
				}
			}
		}
	}
}

// deadLetterConsumers returns the names of the consumers whose dead
// letters are the runner's.
func (r *Runner[S]) deadLetterConsumers() []string {
	names := []string{r.unroutedName()}
	for k := range r.segments {
		events, _ := r.segmentNames(k)
		if events != r.unroutedName() {
			names = append(names, events)
		}
	}
	for k := range r.segments {
		_, outbox := r.segmentNames(k)
		names = append(names, outbox)
	}
	return names
}

// RetryDeadLetter hands dead letter d (as [Runner.DeadLetters] yielded it)
// back: an event to its instance, a step record to the outbox. On success
// the dead letter is deleted; when the event still cannot reach its
// instance, it stays, its attempts counted and its error updated, and the
// error is returned. A dead letter that changed since it was read (retried
// or skipped by another operator, parked again) is an
// [*storekit.DeadLetterChangedError], and nothing is done.
//
// Hand back an instance's dead letters oldest first: its events were
// parked in their order, and the instance takes each stream's events in
// order (an event behind a later one that was handed back is a duplicate).
func (r *Runner[S]) RetryDeadLetter(ctx context.Context, d eventstore.DeadLetter) error {
	now, err := r.currentDeadLetter(ctx, d)
	if err != nil {
		return err
	}
	if err := r.redeliver(ctx, now); err != nil {
		if !instanceProblem(err) && !errors.Is(err, ErrHandlerFailed) {
			return err
		}
		again := now
		again.Attempts++
		again.Error, again.LastFailure = err.Error(), time.Now().UTC()
		if _, perr := r.deadLetters.ParkDeadLetter(ctx, again); perr != nil {
			return perr
		}
		return err
	}
	return r.deadLetters.DeleteDeadLetter(ctx, now.Consumer, now.ID)
}

// SkipDeadLetter deletes dead letter d (as [Runner.DeadLetters] yielded
// it) without handing it back: its event never reaches its instance, its
// record's commands are not sent again. A dead letter that changed since
// it was read is an [*storekit.DeadLetterChangedError], and nothing is
// done.
func (r *Runner[S]) SkipDeadLetter(ctx context.Context, d eventstore.DeadLetter) error {
	now, err := r.currentDeadLetter(ctx, d)
	if err != nil {
		return err
	}
	return r.deadLetters.DeleteDeadLetter(ctx, now.Consumer, now.ID)
}

// currentDeadLetter reads dead letter d again, and returns it when it is
// one of the runner's and still as the operator saw it.
func (r *Runner[S]) currentDeadLetter(ctx context.Context, d eventstore.DeadLetter) (eventstore.DeadLetter, error) {
	if _, err := r.start(); err != nil {
		return eventstore.DeadLetter{}, err
	}
	if r.deadLetters == nil {
		return eventstore.DeadLetter{}, ErrNoDeadLetters
	}
	mine := false
	for _, c := range r.deadLetterConsumers() {
		mine = mine || c == d.Consumer
	}
	if !mine {
		return eventstore.DeadLetter{}, &eventstore.InvalidArgumentError{Consumer: d.Consumer, Index: -1, Field: "dead letter",
			Reason: fmt.Sprintf("is not one of saga %q's consumers'", r.e.t.name)}
	}
	now, err := r.deadLetters.DeadLetter(ctx, d.Consumer, d.ID)
	if errors.Is(err, eventstore.ErrDeadLetterNotFound) {
		return eventstore.DeadLetter{}, &storekit.DeadLetterChangedError{Consumer: d.Consumer, ID: d.ID, Stream: d.Event.StreamID,
			Version: d.Event.Version, Part: d.Part, Generation: d.Generation}
	}
	if err != nil {
		return eventstore.DeadLetter{}, err
	}
	if now.Generation != d.Generation {
		return eventstore.DeadLetter{}, &storekit.DeadLetterChangedError{Consumer: d.Consumer, ID: d.ID, Stream: d.Event.StreamID,
			Version: d.Event.Version, Part: d.Part, Generation: d.Generation, Actual: now.Generation}
	}
	return now, nil
}

// redeliver hands dead letter d's event to where it failed: a step record
// to the outbox, any other event to its instance.
func (r *Runner[S]) redeliver(ctx context.Context, d eventstore.DeadLetter) error {
	ev := d.Event
	if id, ok := strings.CutPrefix(ev.StreamID, r.e.t.Category()); ok && ev.Type == recordType {
		return r.sendRecord(ctx, id, ev)
	}
	_, err := r.HandleStored(ctx, ev)
	return err
}
