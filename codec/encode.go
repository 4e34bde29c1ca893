package codec

import (
	"fmt"
	"reflect"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// Encode serializes a registered event value, a T or a *T, into the
// event to append: its Type, SchemaVersion and Data. The caller sets ID
// and Metadata. An unregistered Go type is an [*EncodeError] matching
// [ErrUnregisteredType]; a nil pointer one matching [ErrNilValue].
func (r *Registry) Encode(v any) (eventstore.EventData, error) {
	raw, err := r.EncodeValue(v)
	if err != nil {
		return eventstore.EventData{}, err
	}
	return eventstore.EventData{Type: raw.Type, SchemaVersion: raw.Version, Data: raw.Data}, nil
}

// EncodeAll encodes several events, as an aggregate's decision returns
// them, in order. It fails as a whole on the first value it cannot encode.
func (r *Registry) EncodeAll(vs ...any) ([]eventstore.EventData, error) {
	return r.encodeAll(vs, nil)
}

// EncodeAllExact is [Registry.EncodeAll] that also answers
// [Registry.RoundTrip] for every value, finding each value's type once
// for both: exact[i] is set to the value RoundTrip(vs[i]) returns when it
// returns true, else to nil. exact must be as long as vs. A writer that
// applies what it appends, as an aggregate's Save does, needs both.
func (r *Registry) EncodeAllExact(vs, exact []any) ([]eventstore.EventData, error) {
	if len(exact) != len(vs) {
		return nil, fmt.Errorf("codec: EncodeAllExact of %d values with room for %d answers", len(vs), len(exact))
	}
	return r.encodeAll(vs, exact)
}

// encodeAll is EncodeAll, and EncodeAllExact when exact is not nil.
func (r *Registry) encodeAll(vs, exact []any) ([]eventstore.EventData, error) {
	out := make([]eventstore.EventData, len(vs))
	for i, v := range vs {
		// Filled in place: an EventData is 120 bytes, which coming out
		// of Encode was copied twice.
		raw, e, err := r.encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("event %d of %d: %w", i, len(vs), err)
		}
		out[i].Type, out[i].SchemaVersion, out[i].Data = raw.Type, raw.Version, raw.Data
		if exact != nil {
			exact[i], _ = e.roundTrip(v)
		}
	}
	return out, nil
}

// EncodeValue serializes any registered value, such as a snapshot or a
// saga's state, to its raw form: type name, current schema version and
// data. Store all three; [Registry.DecodeValue] reads them back, upcasting
// with the same chains as events.
func (r *Registry) EncodeValue(v any) (upcast.Raw, error) {
	raw, _, err := r.encodeValue(v)
	return raw, err
}

// encodeValue is EncodeValue, which also returns the entry of v's type.
func (r *Registry) encodeValue(v any) (upcast.Raw, *entry, error) {
	if err := r.ready(); err != nil {
		return upcast.Raw{}, nil, err
	}
	if v == nil {
		return upcast.Raw{}, nil, &EncodeError{GoType: "nil", Err: fmt.Errorf("%w, of no %w", ErrNilValue, ErrUnregisteredType)}
	}
	t := reflect.TypeOf(v)
	e, ok := r.entryOf(t)
	if !ok {
		return upcast.Raw{}, nil, &EncodeError{GoType: t.String(), Err: ErrUnregisteredType}
	}
	data, err := r.marshal(e, v)
	if err != nil {
		return upcast.Raw{}, nil, &EncodeError{GoType: t.String(), Name: e.name, Version: e.version, Err: err}
	}
	if data == nil {
		data = []byte{} // stores reject nil data
	}
	return upcast.Raw{Type: e.name, Version: e.version, Data: data}, e, nil
}

// entryOf returns the entry of a value of Go type t: a registered T, or a
// *T, which encodes as the T it points to.
func (r *Registry) entryOf(t reflect.Type) (*entry, bool) {
	e, ok := r.byType[t]
	if !ok && t.Kind() == reflect.Pointer {
		e, ok = r.byType[t.Elem()]
	}
	return e, ok
}

// marshal runs the serializer, turning a panic in a custom one (or in a
// user's MarshalJSON) into an error.
func (r *Registry) marshal(e *entry, v any) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("serializer panicked: %v", p)
		}
	}()
	return e.encode(v)
}
