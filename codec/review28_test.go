package codec_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// review28Money is a value type whose IsZero reports "no amount", as a
// money type often does: encoding/json's omitzero calls it.
type review28Money struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func (m review28Money) IsZero() bool { return m.Amount == 0 }

type review28OmitZero struct {
	Fee review28Money `json:"fee,omitzero"`
}

type review28Number struct {
	N json.Number `json:"n"`
}

type review28NegZero struct {
	X float64 `json:"x,omitempty"`
	Y float32 `json:"y,omitempty"`
}

func review28Registry(t *testing.T) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[review28OmitZero](reg, "r28.omitzero", 1))
	require.NoError(t, codec.Register[review28Number](reg, "r28.number", 1))
	require.NoError(t, codec.Register[review28NegZero](reg, "r28.negzero", 1))
	require.NoError(t, reg.Validate())
	return reg
}

// TestReview28RoundTripOmitZeroCallsIsZero: omitzero drops a field whose
// type's IsZero method says so, even though the value is not the zero
// value: the decoded value lacks the currency that RoundTrip keeps.
func TestReview28RoundTripOmitZeroCallsIsZero(t *testing.T) {
	reg := review28Registry(t)
	v := review28OmitZero{Fee: review28Money{Amount: 0, Currency: "EUR"}}
	got, ok := reg.RoundTrip(v)
	if !ok {
		return // refused: nothing to check
	}
	assert.Equal(t, decodeOf(t, reg, v), got, "RoundTrip's value must be the decoded value")
}

// TestReview28RoundTripEmptyJSONNumber: encoding/json writes an empty
// json.Number as 0, so it decodes to "0", not "".
func TestReview28RoundTripEmptyJSONNumber(t *testing.T) {
	reg := review28Registry(t)
	v := review28Number{}
	got, ok := reg.RoundTrip(v)
	if !ok {
		return
	}
	assert.Equal(t, decodeOf(t, reg, v), got, "RoundTrip's value must be the decoded value")
}

// TestReview28RoundTripNegativeZeroOmitEmpty: omitempty drops -0 (it
// compares with ==), which then decodes as +0: equal by ==, but not the
// same float (Signbit, 1/x, fmt print "-0").
func TestReview28RoundTripNegativeZeroOmitEmpty(t *testing.T) {
	reg := review28Registry(t)
	v := review28NegZero{X: math.Copysign(0, -1), Y: float32(math.Copysign(0, -1))}
	got, ok := reg.RoundTrip(v)
	if !ok {
		return
	}
	dec := decodeOf(t, reg, v).(review28NegZero)
	g := got.(review28NegZero)
	assert.Equal(t, fmt.Sprint(dec), fmt.Sprint(g), "the applied value prints as the replayed one")
	assert.Equal(t, math.Signbit(dec.X), math.Signbit(g.X))
}
