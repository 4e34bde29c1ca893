package codec_test

// Registry-level behaviour with the plain codec: a registry on JSON agrees
// with encoding/json directly, and shares no memory with what it decodes
// from. (In review, the same corpus through every Encode and Decode was
// written out on this commit and on its parent, and the outputs were
// identical.)

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/upcast"
)

type s11gInner struct {
	A int8    `json:"a"`
	F float32 `json:"f"`
	S string  `json:"s,omitempty"`
}

type s11gEvent struct {
	I   int     `json:"i"`
	I8  int8    `json:"i8"`
	U16 uint16  `json:"u16,omitempty"`
	U64 uint64  `json:"u64"`
	F32 float32 `json:"f32"`
	F64 float64 `json:"f64"`
	S   string  `json:"s"`
	B   bool    `json:"b,omitempty"`
	In  s11gInner
}

type s11gState struct {
	N     int64   `json:"n"`
	Total float64 `json:"total"`
	Name  string  `json:"name"`
}

type s11gOther struct { // not plain
	Tags []string `json:"tags"`
}

func s11gRegistry(t testing.TB, ser codec.Serializer) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{Serializer: ser})
	require.NoError(t, codec.Register[s11gEvent](reg, "s11.event", 3))
	require.NoError(t, codec.Register[s11gState](reg, "s11.state", 2))
	require.NoError(t, codec.Register[s11gOther](reg, "s11.other", 1))
	require.NoError(t, reg.Upcast(
		// v1 -> v2: "count" becomes "i"
		upcast.TransformJSON("s11.event", 1, func(f map[string]json.RawMessage) error {
			if c, ok := f["count"]; ok {
				f["i"] = c
				delete(f, "count")
			}
			return nil
		}),
		// v2 -> v3: rewritten as bytes, as a user's step may, and kept as they are
		upcast.Transform("s11.event", 2, func(r upcast.Raw) (upcast.Raw, error) { return r, nil }),
		upcast.Transform("s11.state", 1, func(r upcast.Raw) (upcast.Raw, error) {
			r.Data = []byte(strings.Replace(string(r.Data), `"sum"`, `"total"`, 1))
			return r, nil
		}),
	))
	require.NoError(t, reg.Validate())
	return reg
}

func s11gDocs() []string {
	values := []string{"0", "-0", "1", "-1", "127", "128", "-128", "-129", "65535", "65536", "18446744073709551615", "18446744073709551616",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1.5", "1e2", "-0.0",
		"3.4028235e38", "3.4028236e38", "3.5e38", "1e400", "1e-400", "-1e-400", "5e-324", "01", "1.", "true", "false", "null",
		`""`, `"a"`, `"\n"`, `"\u00e9"`, `"é"`, "\"\xff\"", "\"\xed\xa0\x80\"", "\"\u2028\"", "\"\x7f\"", "\"\x01\"", `{}`, `[]`,
		`{"a":1}`, `{"a":-129}`, `{"f":-0}`, `{"f":3.5e38}`, `{"A":1}`, `{"a":1,"a":2}`}
	names := []string{"i", "i8", "u16", "u64", "f32", "f64", "s", "b", "In", "I", "IN", "count", "x", "\u212a"}
	var docs []string
	for _, n := range names {
		for _, v := range values {
			docs = append(docs, `{"`+n+`":`+v+`}`, `{"s":"q","`+n+`":`+v+`,"b":true}`, `{"In":{"`+n+`":`+v+`}}`)
		}
	}
	r := rand.New(rand.NewPCG(31, 31))
	base := `{"i":-1,"i8":-128,"u16":1,"u64":18446744073709551615,"f32":-1.5e-7,"f64":1e+21,"s":"h\u00e9llo","b":true,"In":{"a":1,"f":-0,"s":"x"}}`
	docs = append(docs, base, "", " ", "{}", " {}", "{} ", "{}x", "null", "[]", `"x"`, "\ufeff{}")
	for i := range len(base) {
		docs = append(docs, base[:i])
		for range 6 {
			b := []byte(base)
			const alphabet = "{}[],:\"\\ 0-9eE.+atfnu\x00\x80\xff"
			b[i] = alphabet[r.IntN(len(alphabet))]
			docs = append(docs, string(b))
		}
	}
	return docs
}

func s11gValues() []any {
	neg0 := math.Copysign(0, -1)
	vs := []any{
		s11gEvent{}, &s11gEvent{}, (*s11gEvent)(nil),
		s11gEvent{I: math.MinInt, I8: -128, U16: 65535, U64: math.MaxUint64, F32: math.MaxFloat32, F64: neg0, S: "ok", B: true,
			In: s11gInner{A: 127, F: float32(neg0), S: "é"}},
		s11gEvent{F64: math.NaN()}, s11gEvent{F32: float32(math.Inf(1))}, s11gEvent{In: s11gInner{F: float32(math.Inf(-1))}},
		s11gEvent{S: "<"}, s11gEvent{S: "\u2028"}, s11gEvent{S: "\xff"}, s11gEvent{S: "\x7f"}, s11gEvent{In: s11gInner{S: "a\"b"}},
		s11gEvent{F64: 1e21, F32: 1e-7}, s11gEvent{F64: 1e-7, F32: 1e21}, s11gEvent{F64: 5e-324, F32: math.SmallestNonzeroFloat32},
		s11gState{N: 3, Total: 1.5, Name: "x"}, &s11gState{Total: math.NaN()}, s11gOther{}, s11gOther{Tags: []string{"a"}},
	}
	r := rand.New(rand.NewPCG(32, 32))
	for range 2000 {
		vs = append(vs, s11gEvent{I: int(r.Int64() >> r.IntN(64)), I8: int8(r.Uint32()), U16: uint16(r.Uint32() >> r.IntN(32)),
			U64: r.Uint64() >> r.IntN(64), F32: math.Float32frombits(r.Uint32()), F64: math.Float64frombits(r.Uint64()),
			S: string([]byte{byte(r.IntN(256)), 'a', byte(r.IntN(128))}), B: r.IntN(2) == 0,
			In: s11gInner{A: int8(r.Uint32()), F: float32(r.NormFloat64()), S: string(rune(r.IntN(0x3000)))}})
	}
	return vs
}

// Without a parent to compare with: the registry decodes each document of
// the corpus as encoding/json does (bit for bit, or ErrUndecodable where
// encoding/json fails) and encodes as json.Marshal does.
func TestS11RegistryMatchesEncodingJSON(t *testing.T) {
	for _, ser := range []codec.Serializer{nil, &codec.JSON{}} {
		reg := s11gRegistry(t, ser)
		for _, doc := range s11gDocs() {
			got, err := reg.DecodeValue(upcast.Raw{Type: "s11.event", Version: 3, Data: []byte(doc)})
			var want s11gEvent
			if jerr := json.Unmarshal([]byte(doc), &want); jerr != nil {
				require.ErrorIs(t, err, codec.ErrUndecodable, "%q: encoding/json says %v", doc, jerr)
				continue
			}
			require.NoError(t, err, "%q", doc)
			require.True(t, s11SameValues[any](want, got), "%q: %#v, encoding/json %#v", doc, got, want)
		}
		for _, v := range s11gValues() {
			ed, err := reg.Encode(v)
			want, jerr := json.Marshal(v)
			if v == (*s11gEvent)(nil) {
				require.ErrorIs(t, err, codec.ErrNilValue)
				continue
			}
			if jerr != nil {
				require.Error(t, err, "%#v", v)
				continue
			}
			require.NoError(t, err, "%#v", v)
			require.Equal(t, string(want), string(ed.Data), "%#v", v)
		}
	}
}

// A decoded value shares no memory with the document, and an encoding none
// with another: a store that reuses its read buffer, or a caller that
// appends to the data, changes nothing already decoded or encoded.
func TestS11NoAliasing(t *testing.T) {
	reg := s11gRegistry(t, nil)
	data := []byte(`{"i":1,"s":"hello","In":{"a":1,"f":2,"s":"inner"}}`)
	got, err := reg.DecodeValue(upcast.Raw{Type: "s11.event", Version: 3, Data: data})
	require.NoError(t, err)
	for i := range data {
		data[i] = 'X'
	}
	require.Equal(t, "hello", got.(s11gEvent).S)
	require.Equal(t, "inner", got.(s11gEvent).In.S)

	a, err := reg.Encode(s11gEvent{S: "a"})
	require.NoError(t, err)
	b, err := reg.Encode(s11gEvent{S: "b"})
	require.NoError(t, err)
	before := string(a.Data)
	_ = append(a.Data, "tail"...)
	_ = append(b.Data, "tail"...)
	require.Equal(t, before, string(a.Data))
	require.NotEqual(t, string(a.Data), string(b.Data))
}
