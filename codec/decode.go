package codec

import (
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/upcast"
)

// Decoded is one value decoded from a stored event.
//
// Most stored events decode to exactly one value (Index 0, Count 1). An
// upcaster that splits an event yields Count values from it, Index 0 to
// Count-1, in order; all of them carry the stored event's ID, StreamID,
// Version, Position and RecordedAt, so expected versions and checkpoints
// still refer to stored events. A consumer must therefore treat a stored
// event as handled only after its last part (see [Decoded.Last]): checkpoint
// the Position of a part with Last() true, never of an earlier one.
type Decoded struct {
	// Value is the decoded Go value: a T registered with [Register], not a
	// pointer to it.
	Value any
	// Event is the stored event's envelope. Type, SchemaVersion, Data and
	// Metadata are as after upcasting (equal to the stored ones when no
	// step applied); everything else is as stored.
	Event eventstore.Event
	// Index is this value's place among the values of one stored event;
	// Count is how many there are.
	Index, Count int
}

// Last reports whether d is the last value decoded from its stored event:
// after handling it, the stored event is handled.
func (d Decoded) Last() bool { return d.Index == d.Count-1 }

// PartID identifies this value for deduplication: a UUIDv5 of the stored
// event's stream, ID and Index, the same on every read.
//
// Event IDs are unique per stream only (two streams may hold the same ID),
// so the stream is part of every PartID, part 0's too: the stored ID alone
// would make two events one. Index, not Count, goes in, so an event that
// later starts being split keeps for its first value the PartID it was
// handled under.
func (d Decoded) PartID() uuid.UUID {
	var idx [binary.MaxVarintLen64]byte
	name := make([]byte, 0, len(d.Event.ID)+len(idx)+len(d.Event.StreamID))
	// The ID has a fixed length and the varint ends itself, so no two
	// (ID, index, stream) triples give the same name.
	name = append(name, d.Event.ID[:]...)
	name = binary.AppendUvarint(name, uint64(d.Index))
	name = append(name, d.Event.StreamID...)
	return uuid.NewSHA1(partNamespace, name)
}

// partNamespace is the UUIDv5 namespace of [Decoded.PartID], itself the
// UUIDv5 of "https://github.com/cairn-es/cairn/codec/part" in the URL
// namespace. It never changes: consumers keep the part IDs they
// deduplicate by.
var partNamespace = uuid.MustParse("e7ed63c0-58ef-5cef-8356-ad51a0a3b685")

// Decode runs the upcasters on a stored event and decodes the result: no
// value when the chain drops the event, one, or several when it splits it
// (see [Decoded]). An error is a [*DecodeError] naming the stream, version,
// position and stored type and schema version; it matches ErrUnknownType,
// ErrVersionTooNew, ErrNoUpcastPath, ErrUndecodable or ErrUpcastFailed.
func (r *Registry) Decode(e eventstore.Event) ([]Decoded, error) {
	return r.DecodeAppend(nil, e)
}

// DecodeAppend is [Registry.Decode] appending to dst, so that a reader can
// reuse one slice for every event. On error, dst is returned as given:
// nothing of a failed event is appended.
func (r *Registry) DecodeAppend(dst []Decoded, e eventstore.Event) ([]Decoded, error) {
	// Fast path: the stored event is at the current version. Validation
	// guarantees that no step applies to a current version. DecodeCurrent
	// also refuses a registry whose set-up is invalid, before any decoding.
	if v, current, err := r.DecodeCurrent(&e); current || err != nil {
		if err != nil {
			return dst, err
		}
		return append(dst, Decoded{Value: v, Event: e, Count: 1}), nil
	}

	var buf [4]upcast.Raw
	raws, err := r.chain.Apply(buf[:0], upcast.Raw{Type: e.Type, Version: e.SchemaVersion, Data: e.Data, Metadata: e.Metadata})
	if err != nil {
		return dst, eventError(&e, fmt.Errorf("%w: %w", ErrUpcastFailed, err))
	}
	start := len(dst)
	for i, raw := range raws {
		v, err := r.decodeRaw(raw)
		if err != nil {
			clear(dst[start:])
			return dst[:start], eventError(&e, partError(raw, i, len(raws), e.Type, e.SchemaVersion, err))
		}
		d := Decoded{Value: v, Event: e, Index: i, Count: len(raws)}
		d.Event.Type, d.Event.SchemaVersion, d.Event.Data, d.Event.Metadata = raw.Type, raw.Version, raw.Data, raw.Metadata
		dst = append(dst, d)
	}
	return dst, nil
}

// DecodeCurrent decodes a stored event that is at its type's current
// schema version, which no upcaster rewrites, into its one value, and
// returns true; for any other event it returns false and decodes nothing,
// and [Registry.DecodeAppend] is the way. It is what Decode gives for such
// an event, without the [Decoded] envelope, which a reader that applies
// values in stream order (an aggregate's load) does not need. An error is a
// [*DecodeError], as Decode's.
func (r *Registry) DecodeCurrent(e *eventstore.Event) (any, bool, error) {
	if err := r.ready(); err != nil {
		return nil, false, err
	}
	en, ok := r.byName[e.Type]
	if !ok || en.version != e.SchemaVersion {
		return nil, false, nil
	}
	v, err := r.unmarshal(en, e.Data)
	if err != nil {
		return nil, true, eventError(e, fmt.Errorf("%w: %w", ErrUndecodable, err))
	}
	return v, true, nil
}

// DecodeAll decodes a stream of stored events, as ReadStream, ReadAll and
// Subscribe yield them, into a stream of decoded values, flattening
// splits and skipping dropped events and Cairn's own records (a recorded
// rejection in an aggregate's stream, a saga's step: see [IsReserved]), as
// the aggregate loads and projections do: it is the one way to read a
// stream as its domain events. A read error is passed on; a decode error
// is yielded with a Decoded that carries the stored event and Count 0.
// Either way the consumer decides whether to go on.
func (r *Registry) DecodeAll(events iter.Seq2[eventstore.Event, error]) iter.Seq2[Decoded, error] {
	return func(yield func(Decoded, error) bool) {
		var buf []Decoded
		for e, err := range events {
			if err != nil {
				if !yield(Decoded{Event: e}, err) {
					return
				}
				continue
			}
			if IsReserved(e.Type) {
				continue
			}
			buf, err = r.DecodeAppend(buf[:0], e)
			if err != nil {
				if !yield(Decoded{Event: e}, err) {
					return
				}
				continue
			}
			for _, d := range buf {
				if !yield(d, nil) {
					return
				}
			}
			clear(buf) // let decoded values go once yielded
		}
	}
}

// DecodeValue decodes a value stored with [Registry.EncodeValue], such as
// a snapshot or a saga's state, running the same upcasters as for events.
// A value must come out of the chain as exactly one registered value: when
// the chain has no path for its stored version, drops it or splits it, the
// error matches [ErrNoUpcastPath], and the caller should discard the value
// and rebuild it (for a snapshot, by a full replay). Any other
// [*DecodeError] (ErrVersionTooNew after a rollback, ErrUndecodable, ...)
// equally means the stored value cannot be trusted.
func (r *Registry) DecodeValue(raw upcast.Raw) (any, error) {
	if err := r.ready(); err != nil {
		return nil, err
	}
	if en, ok := r.byName[raw.Type]; ok && en.version == raw.Version {
		v, err := r.unmarshal(en, raw.Data)
		if err != nil {
			return nil, valueError(raw, fmt.Errorf("%w: %w", ErrUndecodable, err))
		}
		return v, nil
	}
	var buf [1]upcast.Raw
	raws, err := r.chain.Apply(buf[:0], raw)
	if err != nil {
		return nil, valueError(raw, fmt.Errorf("%w: %w", ErrUpcastFailed, err))
	}
	if len(raws) != 1 {
		what := "drops it"
		if len(raws) > 1 {
			what = fmt.Sprintf("splits it into %d values", len(raws))
		}
		return nil, valueError(raw, fmt.Errorf("%w: the upcaster chain %s", ErrNoUpcastPath, what))
	}
	v, err := r.decodeRaw(raws[0])
	if err != nil {
		return nil, valueError(raw, partError(raws[0], 0, 1, raw.Type, raw.Version, err))
	}
	return v, nil
}

// DecodeValueAs is [Registry.DecodeValue] for a value known to be a T,
// such as an aggregate's snapshot. A value of another Go type is an error
// matching [ErrUnexpectedType].
func DecodeValueAs[T any](r *Registry, raw upcast.Raw) (T, error) {
	var zero T
	v, err := r.DecodeValue(raw)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, valueError(raw, fmt.Errorf("%w: got %T, want %T", ErrUnexpectedType, v, zero))
	}
	return t, nil
}

// decodeRaw decodes what the chain left of an event: a current type and
// version, or an error saying why it is not.
func (r *Registry) decodeRaw(raw upcast.Raw) (any, error) {
	en, ok := r.byName[raw.Type]
	switch {
	case ok && en.version == raw.Version:
		v, err := r.unmarshal(en, raw.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
		}
		return v, nil
	case ok && raw.Version > en.version:
		return nil, fmt.Errorf("%w: the current version of %q is v%d", ErrVersionTooNew, raw.Type, en.version)
	case ok:
		return nil, fmt.Errorf("%w: no upcaster brings v%d of %q to the current v%d", ErrNoUpcastPath, raw.Version, raw.Type, en.version)
	}
	if newest, has := r.chain.NewestVersion(raw.Type); has {
		if raw.Version > newest {
			return nil, fmt.Errorf("%w: %q is not registered, and upcasters know it up to v%d", ErrVersionTooNew, raw.Type, newest)
		}
		return nil, fmt.Errorf("%w: %q is not registered, and no upcaster applies to v%d", ErrNoUpcastPath, raw.Type, raw.Version)
	}
	return nil, fmt.Errorf("%w: %q is neither registered nor upcast", ErrUnknownType, raw.Type)
}

// unmarshal runs the serializer, turning a panic in a custom one (or in a
// user's UnmarshalJSON) into an error: bad stored data must not crash a
// reader.
func (r *Registry) unmarshal(e *entry, data []byte) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("serializer panicked: %v", p)
		}
	}()
	return e.decode(data)
}

// partError says which part of an upcast event failed, when that is not
// the stored event itself.
func partError(raw upcast.Raw, i, n int, storedType string, storedVersion uint32, err error) error {
	if n == 1 && raw.Type == storedType && raw.Version == storedVersion {
		return err
	}
	if n == 1 {
		return fmt.Errorf("upcast to %q v%d: %w", raw.Type, raw.Version, err)
	}
	return fmt.Errorf("part %d of %d, upcast to %q v%d: %w", i, n, raw.Type, raw.Version, err)
}

func eventError(e *eventstore.Event, err error) error {
	return &DecodeError{Stream: e.StreamID, Version: e.Version, Position: e.Position,
		Type: e.Type, SchemaVersion: e.SchemaVersion, Err: err}
}

func valueError(raw upcast.Raw, err error) error {
	return &DecodeError{Type: raw.Type, SchemaVersion: raw.Version, Err: err}
}
