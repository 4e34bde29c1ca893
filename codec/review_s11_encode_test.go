package codec_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// Promise 1: the plain codec writes exactly what json.Marshal writes, or
// declines (and then json.Marshal runs); it never panics.

type s11Floats struct {
	F32 float32 `json:"f32"`
	F64 float64
	In  struct {
		G32 float32
		G64 float64 `json:"g"`
	} `json:"in,omitempty"`
}

// Float32 values across the whole bit range (a stride through it, and
// around every power of ten's cut-off), float64 values at random and around
// the cut-offs at 1e-6 and 1e21, each written by both.
func TestS11EncodeFloats(t *testing.T) {
	race.Outside(t) // thousands of encodes from one goroutine
	requirePlain[s11Floats](t)
	took := 0
	check := func(f32 float32, f64 float64) {
		v := s11Floats{F32: f32, F64: f64}
		v.In.G32, v.In.G64 = -f32, -f64
		if s11CheckEncode(t, v) {
			took++
		} else {
			_, err := json.Marshal(v)
			require.Error(t, err, "the plain codec declined %#v, which needs no escaping", v)
		}
	}
	for b := uint64(0); b < 1<<32; b += 16411 {
		check(math.Float32frombits(uint32(b)), math.Float64frombits(b<<32|b))
	}
	for _, cut := range []float64{1e-6, 1e21, 1e-7, 1e20, 1e-5, 1e22, 1e-38, 1e38, 5e-324, math.MaxFloat64, 1, 0.1} {
		f32 := float32(cut)
		f64 := cut
		for range 200 {
			check(f32, f64)
			check(math.Float32frombits(math.Float32bits(f32)-200+uint32(rand.IntN(400))), f64)
			f32 = math.Nextafter32(f32, float32(math.Inf(1)))
			f64 = math.Nextafter(f64, math.Inf(1))
		}
		f32, f64 = float32(cut), cut
		for range 200 {
			check(f32, f64)
			f32 = math.Nextafter32(f32, 0)
			f64 = math.Nextafter(f64, 0)
		}
	}
	r := rand.New(rand.NewPCG(21, 21))
	for range 100_000 {
		check(math.Float32frombits(r.Uint32()), math.Float64frombits(r.Uint64()))
	}
	check(float32(math.Copysign(0, -1)), math.Copysign(0, -1))
	check(float32(math.NaN()), 0)
	check(0, math.Inf(-1))
	t.Logf("%d values written", took)
}

type s11Strs struct {
	S  string `json:"s"`
	T  string `json:"t,omitempty"`
	In struct {
		U string
	}
}

// Every rune, every one- and two-byte string, random byte strings, and
// strings of runes from the edges of what is escaped.
func TestS11EncodeStrings(t *testing.T) {
	race.Outside(t) // thousands of encodes from one goroutine
	requirePlain[s11Strs](t)
	took := 0
	check := func(s string) {
		v := s11Strs{S: s, T: s}
		v.In.U = s
		if s11CheckEncode(t, v) {
			took++
			got, _ := codec.PlainEncode(v)
			back, ok := codec.PlainDecode[s11Strs](got)
			require.True(t, ok, "%s", got)
			require.Equal(t, v, back)
		} else {
			want, err := json.Marshal(v)
			require.NoError(t, err)
			_, ok := codec.PlainEncode(s11Strs{S: s})
			// Declined: only right when encoding/json does not write s as
			// it is (it escapes it, or replaces bytes that are not UTF-8).
			assert.NotEqual(t, `{"s":"`+s+`","t":"`+s+`","In":{"U":"`+s+`"}}`, string(want),
				"the plain codec declined %q, which encoding/json writes as it is", s)
			assert.False(t, ok)
		}
	}
	for r := rune(0); r <= 0x10ffff; r++ {
		if r < 0x3000 || r >= 0xd700 && r < 0xe100 || r >= 0xfe00 && r < 0x10100 || r > 0x10fe00 || r%61 == 0 {
			check(string(r))
		}
	}
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, s := range []string{"", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xe0\x80\x80", "\xf4\x90\x80\x80", "\ufeff", "\ufffd",
		"\x7f", "\u2027", "\u202a", "\u2028", "\u2029", "\U0010ffff", "\xf4\x8f\xbf\xbf"} {
		check(s)
	}
	r := rand.New(rand.NewPCG(22, 22))
	for range 50_000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(string(b))
	}
	t.Logf("%d strings written", took)
}

type s11Ints struct {
	I   int    `json:"i,omitempty"`
	I8  int8   `json:"i8,omitempty"`
	I16 int16  `json:"i16"`
	I32 int32  `json:"i32,omitempty"`
	I64 int64  `json:"i64,omitempty"`
	U   uint   `json:"u,omitempty"`
	U8  uint8  `json:"u8,omitempty"`
	U16 uint16 `json:",omitempty"`
	U32 uint32 `json:"u32,omitempty"`
	U64 uint64 `json:"u64,omitempty"`
	B   bool   `json:"b,omitempty"`
	S   string `json:"s,omitempty"`
	Z   struct {
		B bool `json:",omitempty"`
	} `json:"z,omitempty"`
}

// Integers at every width's edges, each alone in an otherwise zero value
// (omitempty leaves out all the others), and at random.
func TestS11EncodeIntegers(t *testing.T) {
	race.Outside(t) // thousands of encodes from one goroutine
	requirePlain[s11Ints](t)
	s11CheckEncode(t, s11Ints{})
	r := rand.New(rand.NewPCG(23, 23))
	edges := []int64{0, 1, -1, math.MinInt8, math.MaxInt8, math.MinInt16, math.MaxInt16, math.MinInt32, math.MaxInt32, math.MinInt64, math.MaxInt64,
		math.MaxUint8, math.MaxUint16, math.MaxUint32, 256, 65536}
	pick := func() int64 {
		if r.IntN(2) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return int64(r.Uint64() >> r.IntN(64))
	}
	for range 50_000 {
		v := s11Ints{}
		switch r.IntN(12) {
		case 0:
			v.I = int(pick())
		case 1:
			v.I8 = int8(pick())
		case 2:
			v.I16 = int16(pick())
		case 3:
			v.I32 = int32(pick())
		case 4:
			v.I64 = pick()
		case 5:
			v.U = uint(pick())
		case 6:
			v.U8 = uint8(pick())
		case 7:
			v.U16 = uint16(pick())
		case 8:
			v.U32 = uint32(pick())
		case 9:
			v.U64 = uint64(pick())
		case 10:
			v.B = true
			v.Z.B = r.IntN(2) == 0
		default:
			v = s11Ints{I: int(pick()), I8: int8(pick()), I16: int16(pick()), I32: int32(pick()), I64: pick(), U: uint(pick()),
				U8: uint8(pick()), U16: uint16(pick()), U32: uint32(pick()), U64: uint64(pick()), B: r.IntN(2) == 0, S: "x"}
		}
		require.True(t, s11CheckEncode(t, v), "%#v", v)
		got, _ := codec.PlainEncode(v)
		back, ok := codec.PlainDecode[s11Ints](got)
		require.True(t, ok, "%s", got)
		require.Equal(t, v, back)
	}
}
