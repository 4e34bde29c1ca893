package saga

import (
	"context"
	"maps"
	"slices"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// instance is a saga instance as its latest step record left it.
type instance[S any] struct {
	id, stream string
	// exists is false for an instance with no record yet.
	exists  bool
	version uint64
	rec     record
}

// expected is the version an append of the next step expects.
func (in *instance[S]) expected() eventstore.ExpectedVersion {
	if !in.exists {
		return eventstore.NoStream
	}
	return eventstore.Exact(in.version)
}

// load reads the latest record of instance id: one event, however long the
// instance's history.
func (e *engine[S]) load(ctx context.Context, id string) (*instance[S], error) {
	in := &instance[S]{id: id, stream: e.t.Stream(id)}
	for ev, err := range e.store.ReadStream(ctx, in.stream, eventstore.Backward(eventstore.End)) {
		if err != nil {
			return nil, err
		}
		rec, err := decodeRecord(ev)
		if err != nil {
			return nil, err
		}
		in.exists, in.version, in.rec = true, ev.Version, *rec
		break
	}
	return in, nil
}

// state decodes the instance's state (a new one for an instance that has
// not started), upcasting a state recorded by older code.
func (e *engine[S]) state(in *instance[S]) (*S, error) {
	if !in.exists || in.rec.State.Type == "" {
		return e.t.initial(in.id), nil
	}
	s, err := codec.DecodeValueAs[S](e.t.reg, in.rec.State.upcast())
	if err != nil {
		return nil, corrupt(in.stream, in.version, "the saga state cannot be decoded", err)
	}
	return &s, nil
}

// next returns a copy of the instance's record to build the next step on:
// it shares no mutable memory with the loaded one, and sends no commands.
func (in *instance[S]) next() record {
	r := in.rec
	r.Marks = maps.Clone(r.Marks)
	if r.Marks == nil {
		r.Marks = make(map[string]uint64)
	}
	r.Held = slices.Clone(r.Held)
	r.Deadlines = slices.Clone(r.Deadlines)
	r.Commands = nil
	if r.Parked != nil {
		p := *r.Parked
		r.Parked = &p
	}
	return r
}
