package storekit

import (
	"encoding/json"
	"slices"

	"github.com/cairn-es/cairn/internal/plainjson"
)

// ExtraJSON returns extra (an event's Metadata.Extra) as the JSON object
// that encoding/json writes for it, byte for byte, or nil when it has no
// entries: for stores that keep it in a JSON column. The common entries,
// strings that need no escaping (a command's type, a trace context), are
// written without encoding/json, whose code and tables an append between
// two round trips to its database has to fetch again: it was a tenth of
// the command bus's time outside the store.
func ExtraJSON(extra map[string]string) []byte {
	if len(extra) == 0 {
		return nil
	}
	var room [4]string
	keys := room[:0]
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as encoding/json sorts a map's keys
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = plainjson.AppendString(b, k); ok {
			b = append(b, ':')
			b, ok = plainjson.AppendString(b, extra[k])
		}
		if !ok {
			data, _ := json.Marshal(extra) // a map of strings always marshals
			return data
		}
	}
	return append(b, '}')
}

// DecodeExtraJSON reads a JSON object of strings, as ExtraJSON writes
// them, into a map, as encoding/json's Unmarshal into a
// map[string]string reads it: the same map, or an error where it fails.
// An object written as ExtraJSON writes one, of strings without escapes,
// is read without encoding/json.
func DecodeExtraJSON(data []byte) (map[string]string, error) {
	if extra, ok := decodePlainExtra(data); ok {
		return extra, nil
	}
	var extra map[string]string
	if err := json.Unmarshal(data, &extra); err != nil {
		return nil, err
	}
	return extra, nil
}

// decodePlainExtra reads data when it is an object of plain strings with
// no whitespace, and reports whether it was.
func decodePlainExtra(data []byte) (map[string]string, bool) {
	if len(data) < 2 || data[0] != '{' {
		return nil, false
	}
	extra := make(map[string]string, 2)
	if len(data) == 2 && data[1] == '}' {
		return extra, true
	}
	for i := 1; ; {
		k, next, ok := plainjson.String(data, i)
		if !ok || next >= len(data) || data[next] != ':' {
			return nil, false
		}
		v, end, ok := plainjson.String(data, next+1)
		if !ok || end >= len(data) {
			return nil, false
		}
		extra[k] = v // a key named twice: the last wins, as in encoding/json
		switch data[end] {
		case '}':
			return extra, end+1 == len(data)
		case ',':
			i = end + 1
		default:
			return nil, false
		}
	}
}
