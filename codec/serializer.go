package codec

import "encoding/json"

// Serializer turns Go values into bytes and back. Unmarshal is given a
// pointer to a zero value of the registered type. Implementations must be
// safe for concurrent use, and should return an error, not panic, on bad
// data (a panic is recovered and reported as [ErrUndecodable]).
type Serializer interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default [Serializer]: encoding/json, with its usual rules
// (exported fields, struct tags, time.Time as RFC 3339, []byte as base64,
// unknown fields ignored).
//
// It encodes with encoding/json. It decodes most types with the Go team's
// implementation of encoding/json on top of encoding/json/v2
// (github.com/go-json-experiment/json/v1, which encoding/json itself runs
// on when the jsonv2 experiment is on, the default from Go 1.27): about
// twice as fast, with a fifth of the allocations, and decoding is about
// half of an aggregate's load. It decodes what encoding/json decodes, and
// refuses what it refuses (only the text of an error differs): codec's
// tests hold the two to that on every kind of value a type can hold, and
// fuzz them. The few types whose values v2 would decode otherwise (see
// decodesOnV2) are decoded by encoding/json. A zero value (as a [Registry]
// always decodes into) decodes a quicker way when its decoding calls no
// method of the type's own, nor of a type outside the few whose methods are
// known to keep and change nothing (time.Time, json.RawMessage, uuid.UUID,
// eventstore.Position), with the same outcome (see chooseJSONDecoding).
//
// A [Registry] on JSON goes further for a plain struct type, the kind most
// events are (booleans, numbers and strings, in structs; see plainCodecOf):
// it writes such a value, and reads the documents encoding/json writes, on
// a codec of its own with encoding/json's outcome byte for byte, and hands
// whatever that codec does not know the outcome of (an escaped string,
// whitespace, a member named in another case, ...) to JSON.
type JSON struct{}

// Marshal implements [Serializer] with [json.Marshal].
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements [Serializer] with encoding/json's rules (see
// [JSON]).
func (JSON) Unmarshal(data []byte, v any) error { return unmarshalJSON(data, v) }
