package upcast

import (
	"encoding/json"
	"fmt"
)

// TransformJSON is a [Transform] for events serialized as JSON objects:
// fn edits the object's top-level fields in place (add, remove, rename,
// rewrite), working on raw JSON values so that nothing it does not touch
// is re-encoded, and numbers keep their precision.
//
// Consecutive TransformJSON steps parse and encode the object once between
// them, not once per step.
func TransformJSON(name string, from uint32, fn func(fields map[string]json.RawMessage) error) Step {
	s := Transform(name, from, nil)
	if fn != nil { // a nil fn leaves the step invalid, as for Transform
		s.editJSON = fn
		s.transform = func(r Raw) (Raw, error) {
			fields, err := JSONFields(r.Data)
			if err != nil {
				return Raw{}, err
			}
			if err := fn(fields); err != nil {
				return Raw{}, err
			}
			if r.Data, err = encodeFields(fields); err != nil {
				return Raw{}, err
			}
			return r, nil
		}
	}
	return s
}

func encodeFields(fields map[string]json.RawMessage) ([]byte, error) {
	data, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode the transformed object: %w", err)
	}
	return data, nil
}

// JSONFields parses a JSON object into its top-level fields, for steps
// that work on JSON without the event's Go type. JSON null gives an empty
// map; any other non-object is an error.
func JSONFields(data []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	return fields, nil
}
