package upcast_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/upcast"
)

func TestTransformJSON(t *testing.T) {
	c := chainOf(t, upcast.TransformJSON("customer.registered", 1, func(f map[string]json.RawMessage) error {
		var name string
		if err := json.Unmarshal(f["name"], &name); err != nil {
			return err
		}
		first, last, _ := strings.Cut(name, " ")
		f["first_name"], _ = json.Marshal(first)
		f["last_name"], _ = json.Marshal(last)
		delete(f, "name")
		return nil
	}))
	out, err := c.Apply(nil, upcast.Raw{Type: "customer.registered", Version: 1,
		Data: []byte(`{"id":12345678901234567890,"name":"Ada Lovelace","tags":["a"]}`)})
	require.NoError(t, err)
	assert.Equal(t, uint32(2), out[0].Version)
	assert.JSONEq(t, `{"id":12345678901234567890,"first_name":"Ada","last_name":"Lovelace","tags":["a"]}`, string(out[0].Data))
	assert.Contains(t, string(out[0].Data), "12345678901234567890", "big numbers keep their digits")

	for _, bad := range []string{`[1]`, `"x"`, `{`, ``} {
		_, err = c.Apply(nil, upcast.Raw{Type: "customer.registered", Version: 1, Data: []byte(bad)})
		require.ErrorIs(t, err, upcast.ErrStepFailed, "data %q", bad)
	}
	_, err = c.Apply(nil, upcast.Raw{Type: "customer.registered", Version: 1, Data: []byte(`{"name":3}`)})
	var typeErr *json.UnmarshalTypeError
	require.True(t, errors.As(err, &typeErr), "the function's error is wrapped: %v", err)
}

func TestJSONFieldsOfNull(t *testing.T) {
	f, err := upcast.JSONFields([]byte(`null`))
	require.NoError(t, err)
	assert.NotNil(t, f)
}

func TestConsecutiveJSONStepsShareOneParse(t *testing.T) {
	set := func(key, value string) func(map[string]json.RawMessage) error {
		return func(f map[string]json.RawMessage) error {
			f[key] = json.RawMessage(value)
			return nil
		}
	}
	c := chainOf(t,
		upcast.TransformJSON("a", 1, set("v2", `2`)),
		upcast.TransformJSON("a", 2, set("v3", `3`)),
		// A plain step between JSON steps sees the fields encoded.
		upcast.Transform("a", 3, func(r upcast.Raw) (upcast.Raw, error) {
			r.Data = []byte(strings.Replace(string(r.Data), `"v3":3`, `"v3":33`, 1))
			return r, nil
		}),
		upcast.Rename("a", 4, "b", 1),
		upcast.TransformJSON("b", 1, set("b2", `true`)),
		upcast.TransformJSON("b", 2, func(f map[string]json.RawMessage) error {
			if string(f["fail"]) == "true" {
				return errors.New("b v2 refuses")
			}
			return nil
		}),
	)
	out, err := c.Apply(nil, upcast.Raw{Type: "a", Version: 1, Data: []byte(`{"x":1}`)})
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, upcast.Key{Type: "b", Version: 3}, out[0].Key())
	assert.JSONEq(t, `{"x":1,"v2":2,"v3":33,"b2":true}`, string(out[0].Data))

	_, err = c.Apply(nil, upcast.Raw{Type: "a", Version: 1, Data: []byte(`{"fail":true}`)})
	var se *upcast.StepError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, upcast.Key{Type: "b", Version: 2}, se.Input, "the failing step is named, not the first of the run")
	assert.Contains(t, err.Error(), "b v2 refuses")

	// A panic in a fused step is recovered like any other.
	c = chainOf(t,
		upcast.TransformJSON("p", 1, set("k", `1`)),
		upcast.TransformJSON("p", 2, func(map[string]json.RawMessage) error { panic("oops") }))
	_, err = c.Apply(nil, upcast.Raw{Type: "p", Version: 1, Data: []byte(`{}`)})
	require.ErrorIs(t, err, upcast.ErrStepFailed)
	assert.Contains(t, err.Error(), "oops")

	// Invalid JSON set by a step fails that run's encoding, as a step error.
	c = chainOf(t, upcast.TransformJSON("q", 1, set("k", `{not json`)))
	_, err = c.Apply(nil, upcast.Raw{Type: "q", Version: 1, Data: []byte(`{}`)})
	require.ErrorIs(t, err, upcast.ErrStepFailed)
}
