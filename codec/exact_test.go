package codec_test

import (
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Types whose JSON round trip is exact.
type (
	exactNested struct {
		Label  string        `json:"label"`
		Inner  exactInner    `json:"inner"`
		Grid   [2][3]int     `json:"grid"`
		Names  [2]string     `json:"names"`
		Inners [2]exactInner `json:"inners"`
	}
	exactInner struct {
		Code string `json:"code"`
		N    uint16 `json:"n"`
	}
	exactScalar string
	// exactOmits leaves fields out that come back as they went: a zero
	// struct of integers and strings, and no array but one of length 0.
	exactOmits struct {
		In     exactInner `json:"in,omitzero"`
		Floats [2]float64 `json:"floats,omitempty"`
	}
)

// Types whose round trip is not known to be exact, each for its reason.
type (
	withTime    struct{ At time.Time }
	withSlice   struct{ Items []int }
	withMap     struct{ Tags map[string]string }
	withPointer struct{ N *int }
	withAny     struct{ V any }
	withHidden  struct{ n int }
	withDropped struct {
		N int `json:"-"`
	}
	withEmbedded struct{ exactInner }
	withClash    struct {
		A int `json:"x"`
		B int `json:"X"`
	}
	withOddName struct {
		A int `json:"a b"`
	}
	withOwnJSON  struct{ N int }
	withOwnText  struct{ N int }
	innerOwnJSON struct{ In withOwnJSON }
	withComplex  struct{ C complex128 }
	// -0 is zero: a struct or array holding only zeros and -0 is left out
	// by omitzero, and comes back with +0.
	withZeroFloats struct {
		In  struct{ F float64 } `json:"in,omitzero"`
		Arr [2]float32          `json:"arr,omitzero"`
	}
)

func (withOwnJSON) MarshalJSON() ([]byte, error)  { return []byte(`{"N":1}`), nil }
func (*withOwnText) UnmarshalText(b []byte) error { return nil }

func roundTripRegistry(t testing.TB, opts codec.Options) *codec.Registry {
	t.Helper()
	reg := codec.NewRegistry(opts)
	require.NoError(t, codec.Register[exactFlat](reg, "t.flat", 1))
	require.NoError(t, codec.Register[exactNested](reg, "t.nested", 2))
	require.NoError(t, codec.Register[exactScalar](reg, "t.scalar", 1))
	require.NoError(t, codec.Register[withTime](reg, "t.time", 1))
	require.NoError(t, codec.Register[withSlice](reg, "t.slice", 1))
	require.NoError(t, codec.Register[withMap](reg, "t.map", 1))
	require.NoError(t, codec.Register[withPointer](reg, "t.pointer", 1))
	require.NoError(t, codec.Register[withAny](reg, "t.any", 1))
	require.NoError(t, codec.Register[withHidden](reg, "t.hidden", 1))
	require.NoError(t, codec.Register[withDropped](reg, "t.dropped", 1))
	require.NoError(t, codec.Register[withEmbedded](reg, "t.embedded", 1))
	require.NoError(t, codec.Register[withClash](reg, "t.clash", 1))
	require.NoError(t, codec.Register[withOddName](reg, "t.oddname", 1))
	require.NoError(t, codec.Register[withOwnJSON](reg, "t.ownjson", 1))
	require.NoError(t, codec.Register[withOwnText](reg, "t.owntext", 1))
	require.NoError(t, codec.Register[innerOwnJSON](reg, "t.innerownjson", 1))
	require.NoError(t, codec.Register[withComplex](reg, "t.complex", 1))
	require.NoError(t, codec.Register[exactOmits](reg, "t.omits", 1))
	require.NoError(t, codec.Register[withZeroFloats](reg, "t.zerofloats", 1))
	require.NoError(t, reg.Validate())
	return reg
}

// exactFlat is exact: every kind of number, a bool, strings and tag options.
type exactFlat struct {
	Amount int     `json:"amount"`
	Small  int8    `json:"small,omitempty"`
	Big    uint64  `json:"big"`
	Ratio  float64 `json:"ratio"`
	Half   float32
	Done   bool   `json:",omitempty"`
	Note   string `json:"note"`
	Quoted int    `json:"quoted,string"`
}

// decodeOf encodes v and decodes it back, as a save and a replay would.
func decodeOf(t testing.TB, reg *codec.Registry, v any) any {
	t.Helper()
	data, err := reg.Encode(v)
	require.NoError(t, err)
	ds, err := reg.Decode(eventstore.Event{EventData: data, StreamID: "s", Version: 0})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0].Value
}

// roundTripChecked is reg.RoundTrip(v), checked against what EncodeAllExact
// answers for v: the same, with the encoding EncodeAll gives (or neither
// when v does not encode).
func roundTripChecked(t testing.TB, reg *codec.Registry, v any) (any, bool) {
	t.Helper()
	exact := []any{"unset"}
	data, err := reg.EncodeAllExact([]any{v}, exact)
	want, wantErr := reg.EncodeAll(v)
	got, ok := reg.RoundTrip(v)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		require.False(t, ok, "RoundTrip answers for a value that does not encode: %#v", v)
		return got, ok
	}
	require.NoError(t, err)
	require.Equal(t, want, data)
	if ok {
		require.Equal(t, got, exact[0], "EncodeAllExact's value is RoundTrip's")
	} else {
		require.Nil(t, exact[0], "EncodeAllExact answers where RoundTrip does not: %#v", v)
	}
	return got, ok
}

// TestEncodeAllExactNeedsRoomForEveryAnswer: a slice of answers shorter or
// longer than the values is refused before anything is encoded.
func TestEncodeAllExactNeedsRoomForEveryAnswer(t *testing.T) {
	reg := roundTripRegistry(t, codec.Options{})
	for _, room := range []int{0, 1, 3} {
		exact := make([]any, room)
		data, err := reg.EncodeAllExact([]any{exactFlat{Amount: 1}, exactFlat{Amount: 2}}, exact)
		require.Error(t, err, "room for %d", room)
		assert.Nil(t, data)
		assert.Contains(t, err.Error(), "2 values")
	}
	exact := make([]any, 3)
	data, err := reg.EncodeAllExact([]any{exactFlat{Amount: 1}, withTime{At: time.Now()}, &exactFlat{Amount: 3}}, exact)
	require.NoError(t, err)
	require.Len(t, data, 3)
	assert.Equal(t, []any{exactFlat{Amount: 1}, nil, exactFlat{Amount: 3}}, exact, "each value answered in its place")
}

// TestRoundTripIsTheDecodedValue: whenever RoundTrip answers, its value is
// the one decoding the encoding gives, for random values of every exact
// type (testing/quick), pointers to them included.
func TestRoundTripIsTheDecodedValue(t *testing.T) {
	reg := roundTripRegistry(t, codec.Options{})
	cfg := &quick.Config{MaxCount: 2000, Rand: rand.New(rand.NewSource(1))}
	for _, typ := range []reflect.Type{reflect.TypeFor[exactFlat](), reflect.TypeFor[exactNested](), reflect.TypeFor[exactScalar](), reflect.TypeFor[exactOmits]()} {
		t.Run(typ.Name(), func(t *testing.T) {
			answered := 0
			check := func(v any) bool {
				got, ok := roundTripChecked(t, reg, v)
				if !ok {
					return true
				}
				answered++
				return assert.Equal(t, decodeOf(t, reg, v), got) && assert.Equal(t, reflect.TypeOf(got), typ)
			}
			for range cfg.MaxCount {
				rv, ok := quick.Value(typ, cfg.Rand)
				require.True(t, ok)
				if f, isFlat := rv.Interface().(exactFlat); isFlat && (math.IsNaN(f.Ratio) || math.IsInf(f.Ratio, 0)) {
					continue // not encodable at all
				}
				require.True(t, check(rv.Interface()))
				ptr := reflect.New(typ)
				ptr.Elem().Set(rv)
				require.True(t, check(ptr.Interface()), "a *T round-trips to the T")
			}
			assert.Equal(t, 2*cfg.MaxCount, answered, "every valid value of an exact type is answered for")
		})
	}
}

// TestRoundTripRefusesWhatItCannotKnow: types whose decoded values differ
// from (or share memory with) what was encoded, values with invalid
// UTF-8, other serializers, and values that are not registered.
func TestRoundTripRefusesWhatItCannotKnow(t *testing.T) {
	reg := roundTripRegistry(t, codec.Options{})
	n := 1
	for _, v := range []any{
		withTime{At: time.Now()}, withSlice{}, withMap{}, withPointer{N: &n}, withAny{V: 1}, withHidden{n: 1},
		withDropped{N: 1}, withEmbedded{}, withClash{A: 1, B: 2}, withOddName{}, withOwnJSON{}, withOwnText{},
		innerOwnJSON{}, withComplex{}, withZeroFloats{}, withZeroFloats{Arr: [2]float32{float32(math.Copysign(0, -1))}},
		exactFlat{Note: "bad \xff byte"}, exactNested{Inners: [2]exactInner{{Code: "\xc3"}}}, exactScalar("\xed\xa0\x80"),
		(*exactFlat)(nil), 42, nil,
	} {
		_, ok := roundTripChecked(t, reg, v)
		assert.False(t, ok, "%T %v", v, v)
	}
	// Each refusal is a real loss: the decoded value differs.
	for _, v := range []any{withTime{At: time.Now()}, withHidden{n: 1}, withDropped{N: 1}, exactFlat{Note: "bad \xff byte"}} {
		assert.NotEqual(t, v, decodeOf(t, reg, v), "%T", v)
	}

	other := roundTripRegistry(t, codec.Options{Serializer: indentJSON{}})
	_, ok := roundTripChecked(t, other, exactFlat{Amount: 1})
	assert.False(t, ok, "only the default JSON serializer's round trip is known")

	unfrozen := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[exactFlat](unfrozen, "t.flat", 1))
	_, ok = unfrozen.RoundTrip(exactFlat{})
	assert.False(t, ok, "a registry that is not validated answers nothing")
	_, ok = roundTripChecked(t, unfrozen, exactFlat{})
	assert.True(t, ok, "EncodeAllExact validates the registry first, as EncodeAll does: then both answer")
}

type indentJSON struct{}

func (indentJSON) Marshal(v any) ([]byte, error)      { return json.MarshalIndent(v, "", " ") }
func (indentJSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// FuzzRoundTripExact: for any field values that encode, RoundTrip answers with
// exactly the decoded value, or not at all (invalid UTF-8).
func FuzzRoundTripExact(f *testing.F) {
	f.Add(int64(1), uint64(2), 0.5, "note", "code", true)
	f.Add(int64(math.MinInt64), uint64(math.MaxUint64), math.Copysign(0, -1), "\xff", "\u2028<&>", false)
	f.Add(int64(0), uint64(0), 1e308, "", "\ufffd", true)
	reg := roundTripRegistry(f, codec.Options{})
	f.Fuzz(func(t *testing.T, i int64, u uint64, x float64, s1, s2 string, b bool) {
		v := exactNested{Label: s1, Inner: exactInner{Code: s2, N: uint16(u)}, Grid: [2][3]int{{int(i)}}, Names: [2]string{s2, s1}}
		flat := exactFlat{Amount: int(i), Big: u, Ratio: x, Half: float32(x), Done: b, Note: s1, Quoted: int(i)}
		for _, v := range []any{v, flat} {
			data, err := reg.Encode(v)
			if err != nil {
				continue // NaN or infinity: nothing is saved, so nothing applied
			}
			got, ok := roundTripChecked(t, reg, v)
			if !ok {
				continue
			}
			ds, err := reg.Decode(eventstore.Event{EventData: data, StreamID: "s"})
			require.NoError(t, err)
			require.Equal(t, ds[0].Value, got)
		}
	})
}

// TestDecodeCurrentOnlyAnswersForCurrentEvents: an event at its type's
// current version decodes to what Decode gives; an older one, or an
// unknown type, is left to Decode; undecodable data is a DecodeError.
func TestDecodeCurrentOnlyAnswersForCurrentEvents(t *testing.T) {
	reg := roundTripRegistry(t, codec.Options{})
	data, err := reg.Encode(exactNested{Label: "x"})
	require.NoError(t, err)
	e := eventstore.Event{EventData: data, StreamID: "s", Version: 4}
	v, current, err := reg.DecodeCurrent(&e)
	require.NoError(t, err)
	require.True(t, current)
	assert.Equal(t, decodeOf(t, reg, exactNested{Label: "x"}), v)

	old := e
	old.SchemaVersion = 1
	_, current, err = reg.DecodeCurrent(&old)
	assert.NoError(t, err)
	assert.False(t, current, "version 1 of t.nested (current 2) is for the upcasters")
	unknown := e
	unknown.Type = "t.unknown"
	_, current, err = reg.DecodeCurrent(&unknown)
	assert.NoError(t, err)
	assert.False(t, current)

	bad := e
	bad.Data = []byte(`{"label": 7}`)
	_, current, err = reg.DecodeCurrent(&bad)
	assert.True(t, current)
	var de *codec.DecodeError
	require.ErrorAs(t, err, &de)
	assert.ErrorIs(t, err, codec.ErrUndecodable)
	assert.Equal(t, uint64(4), de.Version)
}
