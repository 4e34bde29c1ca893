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
type JSON struct{}

// Marshal implements [Serializer] with [json.Marshal].
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements [Serializer] with [json.Unmarshal].
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
