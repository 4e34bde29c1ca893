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

// load returns instance id as its latest record left it, for a step: from
// the cache, or read from the store (one event, however long the
// instance's history) and cached. The caller holds the instance's lock, so
// no step of this process lands between the read and the Put. cached says
// the instance came from the cache: another process may have stepped it
// since, which the step's append will find out, but a step that decides to
// store nothing must look again (see engine.step).
func (e *engine[S]) load(ctx context.Context, id string) (in *instance[S], cached bool, err error) {
	stream := e.t.Stream(id)
	if in, ok := e.cache.Get(stream); ok {
		return in, true, nil
	}
	in, err = e.read(ctx, id)
	if err == nil && in.exists {
		e.cache.Put(stream, in)
	}
	return in, false, err
}

// peek returns instance id as this process last saw it, when that view
// includes at least record version, or as the store has it, without
// caching what it reads: for readers that do not hold the instance's lock.
func (e *engine[S]) peek(ctx context.Context, id string, version uint64) (*instance[S], error) {
	if in, ok := e.cache.Get(e.t.Stream(id)); ok && in.version >= version {
		return in, nil
	}
	return e.read(ctx, id)
}

// read reads the latest record of instance id from the store.
func (e *engine[S]) read(ctx context.Context, id string) (*instance[S], error) {
	in := &instance[S]{id: id, stream: e.t.Stream(id)}
	for ev, err := range e.store.ReadStream(ctx, in.stream, eventstore.ReadOptions{From: eventstore.End, Backward: true, Limit: 1}) {
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
	r.Sources = maps.Clone(r.Sources) // progress values copy their slices before changing them
	if r.Sources == nil {
		r.Sources = make(map[string]progress)
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
