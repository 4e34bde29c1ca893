package codec_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

type s8Inner struct{ F float64 }

// s8OmitZeroStruct: omitzero on a struct (or array) field holding a float.
// Since Go 1.22 reflect.Value.IsZero reports -0 as zero, so encoding/json's
// omitzero drops {F: -0}, which decodes as +0.
type s8OmitZeroStruct struct {
	In  s8Inner    `json:"in,omitzero"`
	Arr [2]float32 `json:"arr,omitzero"`
}

type s8Str struct {
	S string
	A [2]string
}

type s8Inexact struct{ L []int }

type s8Scalar int

func s8Decode(t *testing.T, reg *codec.Registry, d eventstore.EventData) any {
	t.Helper()
	ds, err := reg.Decode(eventstore.Event{EventData: d, StreamID: "s-1", Version: 0})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0].Value
}

func s8Registry(t *testing.T, opts codec.Options) *codec.Registry {
	reg := codec.NewRegistry(opts)
	require.NoError(t, codec.Register[s8OmitZeroStruct](reg, "s8.omitzero", 1))
	require.NoError(t, codec.Register[s8Str](reg, "s8.str", 1))
	require.NoError(t, codec.Register[s8Inexact](reg, "s8.inexact", 1))
	require.NoError(t, codec.Register[s8Scalar](reg, "s8.scalar", 3))
	return reg
}

// TestReviewS8RoundTripOmitZeroNegativeZero: RoundTrip (and so
// EncodeAllExact, and Save) claims the value in hand is what decoding
// gives, but a -0 inside an omitzero struct or array field comes back +0.
func TestReviewS8RoundTripOmitZeroNegativeZero(t *testing.T) {
	reg := s8Registry(t, codec.Options{})
	require.NoError(t, reg.Validate())
	negz := math.Copysign(0, -1)
	for _, v := range []s8OmitZeroStruct{
		{In: s8Inner{F: negz}},
		{Arr: [2]float32{float32(negz), 0}},
	} {
		got, ok := reg.RoundTrip(v)
		if !ok {
			continue // refused: fine
		}
		data, err := reg.Encode(v)
		require.NoError(t, err)
		dec := s8Decode(t, reg, data).(s8OmitZeroStruct)
		gv := got.(s8OmitZeroStruct)
		t.Logf("encoded %s", data.Data)
		assert.Equal(t, math.Signbit(gv.In.F), math.Signbit(dec.In.F), "RoundTrip's In.F sign differs from the decoded one")
		assert.Equal(t, math.Signbit(float64(gv.Arr[0])), math.Signbit(float64(dec.Arr[0])), "RoundTrip's Arr[0] sign differs from the decoded one")
	}
}

// TestReviewS8EncodeAllExactMatchesRoundTrip: mixed slices, pointers, nil
// pointers, invalid UTF-8, unregistered types, custom serializer,
// unvalidated registry.
func TestReviewS8EncodeAllExactMatchesRoundTrip(t *testing.T) {
	mixed := []any{
		s8Str{S: "ok", A: [2]string{"a", "b"}},
		&s8Str{S: "ptr"},
		s8Str{S: "bad \xff"},
		&s8Str{A: [2]string{"", "\xc3"}},
		s8Inexact{L: []int{1}},
		&s8Inexact{},
		s8Scalar(7),
		ptr(s8Scalar(-3)),
		s8OmitZeroStruct{In: s8Inner{F: 1.5}},
	}
	for _, opts := range []codec.Options{{}, {Serializer: codec.JSON{}}, {Serializer: &codec.JSON{}}, {Serializer: s8Ser{}}} {
		for _, validate := range []bool{true, false} {
			reg := s8Registry(t, opts)
			if validate {
				require.NoError(t, reg.Validate())
			}
			exact := make([]any, len(mixed))
			for i := range exact {
				exact[i] = "junk"
			}
			data, err := reg.EncodeAllExact(mixed, exact)
			require.NoError(t, err)
			want, err := reg.EncodeAll(mixed...)
			require.NoError(t, err)
			require.Equal(t, want, data)
			for i, v := range mixed {
				rt, ok := reg.RoundTrip(v)
				if ok {
					assert.Equal(t, rt, exact[i], "%d %T", i, v)
					assert.Equal(t, s8Decode(t, reg, data[i]), exact[i], "%d: exact value is the decoded one", i)
				} else {
					assert.Nil(t, exact[i], "%d %T", i, v)
				}
			}
			if _, custom := opts.Serializer.(s8Ser); custom {
				for i := range exact {
					assert.Nil(t, exact[i], "custom serializer: %d", i)
				}
			} else {
				// s8OmitZeroStruct is not exact: -0 in its omitzero fields
				// comes back as +0 (TestReviewS8RoundTripOmitZeroNegativeZero).
				assert.Equal(t, []any{mixed[0], s8Str{S: "ptr"}, nil, nil, nil, nil, s8Scalar(7), s8Scalar(-3), nil}, exact)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

type s8Ser struct{ codec.JSON }

// TestReviewS8EncodeAllExactFailures: nil *T, unregistered types, nil
// values and wrong lengths fail like EncodeAll, encoding nothing.
func TestReviewS8EncodeAllExactFailures(t *testing.T) {
	reg := s8Registry(t, codec.Options{})
	for _, bad := range [][]any{
		{s8Str{}, (*s8Str)(nil)},
		{s8Str{}, 42},
		{nil},
		{s8Str{}, &[]int{}},
		{s8Str{}, ptr(ptr(s8Str{}))},
	} {
		exact := make([]any, len(bad))
		data, err := reg.EncodeAllExact(bad, exact)
		_, wantErr := reg.EncodeAll(bad...)
		require.Error(t, wantErr)
		require.EqualError(t, err, wantErr.Error())
		assert.Nil(t, data)
		t.Logf("exact after failure: %v", exact)
	}
	for _, n := range []int{0, 1, 3, 100} {
		data, err := reg.EncodeAllExact([]any{s8Str{}, s8Str{}}, make([]any, n))
		require.Error(t, err)
		assert.Nil(t, data)
	}
	_, err := reg.EncodeAllExact([]any{s8Str{}}, nil)
	require.Error(t, err, "nil exact for one value")
	data, err := reg.EncodeAllExact(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, data)
	data, err = reg.EncodeAllExact([]any{}, []any{})
	require.NoError(t, err)
	assert.Empty(t, data)

	// an invalid set-up: both fail, with the same error
	broken := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[s8Str](broken, "s8.str", 1))
	require.Error(t, codec.Register[s8Scalar](broken, "s8.str", 1))
	_, err1 := broken.EncodeAllExact([]any{s8Str{}}, make([]any, 1))
	_, err2 := broken.EncodeAll(s8Str{})
	require.Error(t, err1)
	require.EqualError(t, err1, err2.Error())
	_, ok := broken.RoundTrip(s8Str{})
	assert.False(t, ok)
}

type s8Quoted struct {
	S  string  `json:"s,string"`
	F  float64 `json:"f,string"`
	G  float32 `json:"g,string"`
	B  bool    `json:"b,string"`
	U  uint64  `json:"u,string"`
	I  int64   `json:"i"`
	In struct {
		S string `json:"s,string"`
		F float64
	} `json:"in"`
	Arr [3]float32 `json:"arr,omitempty"`
}

// TestReviewS8ExactValuesDecodeToThemselves: wherever EncodeAllExact
// answers, the answer is the decoded stored event, for edge values of
// quoted (",string") fields, extreme numbers, and strings JSON escapes.
func TestReviewS8ExactValuesDecodeToThemselves(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[s8Quoted](reg, "s8.quoted", 1))
	negz := math.Copysign(0, -1)
	var vs []any
	for _, s := range []string{"", "\u2028<>&\"\\", "\x00\x1f", "ü", `"quoted"`, "\ufffd"} {
		for _, f := range []float64{negz, math.SmallestNonzeroFloat64, math.MaxFloat64, -1e-320, 1e21, 0.1} {
			v := s8Quoted{S: s, F: f, G: float32(max(min(f, math.MaxFloat32), -math.MaxFloat32)), B: f < 0, U: math.MaxUint64, I: math.MinInt64}
			v.In.S, v.In.F = s, f
			v.Arr = [3]float32{float32(negz), math.SmallestNonzeroFloat32, math.MaxFloat32}
			vs = append(vs, v, &v)
		}
	}
	exact := make([]any, len(vs))
	data, err := reg.EncodeAllExact(vs, exact)
	require.NoError(t, err)
	answered := 0
	for i := range vs {
		if exact[i] == nil {
			continue
		}
		answered++
		got := s8Decode(t, reg, data[i]).(s8Quoted)
		want := exact[i].(s8Quoted)
		assert.Equal(t, want, got, "%d: %s", i, data[i].Data)
		assert.Equal(t, math.Signbit(want.F), math.Signbit(got.F), "%d: %s", i, data[i].Data)
		assert.Equal(t, math.Signbit(want.In.F), math.Signbit(got.In.F), "%d: %s", i, data[i].Data)
		assert.Equal(t, math.Signbit(float64(want.Arr[0])), math.Signbit(float64(got.Arr[0])), "%d", i)
	}
	assert.Equal(t, len(vs), answered, "every value here is exact")
}
