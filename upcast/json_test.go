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
