package saga

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-es/cairn/eventstore"
)

// Retry runs an instance's parked message again. When it succeeds the
// instance goes on with the messages held behind it; when it fails again
// it stays parked, its attempts counted. An instance with nothing parked
// is [ErrNotParked].
func (r *Runner[S]) Retry(ctx context.Context, id string) (Outcome, error) {
	unlock, err := r.e.locks.Lock(ctx, r.e.t.Stream(id))
	if err != nil {
		return 0, err
	}
	defer unlock()
	in, err := r.e.read(ctx, id)
	if err != nil {
		return 0, err
	}
	p := in.rec.Parked
	if p == nil {
		return 0, fmt.Errorf("%w: saga %q, instance %q", ErrNotParked, r.e.t.name, id)
	}
	kind := p.Message.Kind
	switch {
	case p.Deadline != "":
		kind = kindDeadline
	case kind == "":
		kind = kindEvent
	}
	out, err := r.e.retried(ctx, id, &message{kind: kind, in: p.Message, deadline: p.Deadline, unpark: true})
	if err != nil {
		return Outcome(out), err
	}
	return Outcome(out), r.e.drain(ctx, id)
}

// Skip drops an instance's parked message without handling it: its source
// goes on after it, and the instance with the messages held behind it. A
// skipped deadline does not fire. An instance with nothing parked is
// [ErrNotParked].
func (r *Runner[S]) Skip(ctx context.Context, id string) error {
	return r.operate(ctx, id, func(in *instance[S], rec *record) error {
		p := in.rec.Parked
		if p == nil {
			return fmt.Errorf("%w: saga %q, instance %q", ErrNotParked, r.e.t.name, id)
		}
		rec.Parked = nil
		rec.Handled = cause{Kind: kindSkipped, Source: p.Message.Source, Sequence: p.Message.Sequence, EventID: p.Message.EventID,
			Type: p.Message.Event.Type, Deadline: p.Deadline, Command: p.Message.Command}
		if p.Deadline != "" {
			rec.Deadlines = slices.DeleteFunc(rec.Deadlines, func(d deadline) bool { return d.ID == p.Deadline })
		} else if mark, seen := rec.Marks[p.Message.Source]; !seen || mark < p.Message.Sequence {
			rec.Marks[p.Message.Source] = p.Message.Sequence
		}
		return nil
	})
}

// Release gives up waiting for the missing messages of source that an
// instance's held messages wait for: the lowest held message of source
// becomes the next one, and the instance goes on from there. Use it for a
// gap that will never fill (see [Runner.Explain]). A source with nothing
// held is an [*eventstore.InvalidArgumentError].
func (r *Runner[S]) Release(ctx context.Context, id, source string) error {
	return r.operate(ctx, id, func(in *instance[S], rec *record) error {
		lowest, found := uint64(0), false
		for _, h := range rec.Held {
			if h.Source == source && (!found || h.Sequence < lowest) {
				lowest, found = h.Sequence, true
			}
		}
		if !found {
			return &eventstore.InvalidArgumentError{Index: -1, Field: "source",
				Reason: fmt.Sprintf("%q has no message held in saga %q, instance %q", source, r.e.t.name, id)}
		}
		if lowest > 0 {
			rec.Marks[source] = lowest - 1
		}
		rec.Handled = cause{Kind: kindReleased, Source: source, Sequence: lowest}
		return nil
	})
}

// operate stores one operator's step on an instance, made by change from
// its latest record, then handles what the step released.
func (r *Runner[S]) operate(ctx context.Context, id string, change func(in *instance[S], rec *record) error) error {
	unlock, err := r.e.locks.Lock(ctx, r.e.t.Stream(id))
	if err != nil {
		return err
	}
	defer unlock()
	for conflicts := 0; ; conflicts++ {
		in, err := r.e.read(ctx, id)
		if err != nil {
			return err
		}
		if !in.exists {
			return &eventstore.InvalidArgumentError{Index: -1, Field: "instance",
				Reason: fmt.Sprintf("saga %q has no instance %q", r.e.t.name, id)}
		}
		rec := in.next()
		if err := change(in, &rec); err != nil {
			return err
		}
		rec.Handled.At = r.e.now().UTC()
		h := rec.Handled
		key := "op/" + h.Kind + "/" + h.Source + "/" + uitoa(h.Sequence) + "/" + h.Deadline
		data, err := encodeRecord(in.stream, in.version+1, key, &rec, eventstore.Metadata{})
		if err != nil {
			return err
		}
		res, err := r.e.store.Append(ctx, in.stream, in.expected(), data)
		if err == nil && res.Duplicate {
			r.e.cache.Evict(in.stream)
			return r.e.drain(ctx, id)
		}
		if err == nil {
			r.e.stepped(in, in.version+1, &rec)
			return r.e.drain(ctx, id)
		}
		r.e.cache.Evict(in.stream)
		if !isConflict(err) || conflicts >= maxConflicts {
			return err
		}
	}
}
