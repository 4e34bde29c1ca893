package codec_test

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// Promise 2: the plain codec decodes a document only into what
// encoding/json.Unmarshal decodes it into, without error, bit for bit.

type s11Inner struct {
	A int8    `json:"a"`
	F float32 `json:"f"`
	S string  `json:"s,omitempty"`
	E struct{}
}

type s11Nums struct {
	I   int     `json:"i"`
	I8  int8    `json:"i8"`
	I16 int16   `json:"i16"`
	I32 int32   `json:"i32,omitempty"`
	I64 int64   `json:"i64"`
	U   uint    `json:"u"`
	U8  uint8   `json:"u8"`
	U16 uint16  `json:"u16,omitempty"`
	U32 uint32  `json:"u32"`
	U64 uint64  `json:"u64"`
	F32 float32 `json:"f32"`
	F64 float64 `json:"f64"`
	S   string  `json:"s"`
	B   bool    `json:"b,omitempty"`
	In  s11Inner
	Nm  s11Int `json:"nm"`
}

var s11Names = []string{"i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "s", "b", "In", "nm",
	// near misses: case, Kelvin, long s, unknown, empty, prefix/suffix
	"I", "I8", "F32", "S", "B", "in", "IN", "Nm", "NM", "\u212a", "\u017f", "x", "", "i6", "i644", "In ", " In", "f\x00", "s\\", "\u0130"}

// s11Numbers are numbers at and around every width's edges, and every
// kind of syntax JSON allows or refuses for a number.
func s11Numbers() []string {
	out := []string{"0", "-0", "1", "-1", "00", "01", "-00", "-01", "+1", "1.", ".1", "-", "--1", "1e", "1e+", "1e-", "1E5", "1e05",
		"0e0", "-0e-0", "0.0", "-0.0", "0.000", "1.0", "1.5", "1e2", "1E+2", "1e-2", "0x10", "1_000", "Infinity", "-Infinity", "NaN",
		"1e400", "-1e400", "1e-400", "-1e-400", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "5e-324",
		"1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "-1.7976931348623159e308",
		"3.4028235e38", "3.4028236e38", "3.40282356779733661637539395458142568448e38", "3.40282356779733661637539395458142568447e38",
		"3.4028235677973366e38", "3.402823567797337e38", "-3.4028236e38", "3.5e38",
		"1.401298464324817e-45", "7.006492321624085e-46", "7.006492321624086e-46", "7e-46", "1e-46", "-1e-46",
		"1.1754943508222875e-38", "1.1754942e-38", "16777217", "9007199254740993", "0.1", "0.30000000000000004",
		"1" + strings.Repeat("0", 400), "0." + strings.Repeat("0", 400) + "1", "1" + strings.Repeat("0", 800) + "e-800",
		strings.Repeat("9", 1000), "-" + strings.Repeat("9", 30), "1e" + strings.Repeat("9", 30), "1e-" + strings.Repeat("9", 30),
		"123456789012345678901234567890", "1e2147483648", "1e-2147483649",
	}
	for _, bits := range []uint{8, 16, 32, 64} {
		max := new(big.Int).Lsh(big.NewInt(1), bits-1)
		umax := new(big.Int).Lsh(big.NewInt(1), bits)
		for _, d := range []int64{-2, -1, 0, 1} {
			out = append(out,
				new(big.Int).Add(max, big.NewInt(d)).String(),
				new(big.Int).Neg(new(big.Int).Add(max, big.NewInt(d))).String(),
				new(big.Int).Add(umax, big.NewInt(d)).String(),
				new(big.Int).Neg(new(big.Int).Add(umax, big.NewInt(d))).String())
		}
	}
	for _, n := range out[:len(out):len(out)] {
		if !strings.ContainsAny(n, ".eE") && n != "" && n[len(n)-1] >= '0' && n[len(n)-1] <= '9' && len(n) < 40 {
			out = append(out, n+".0", n+"e0", n+"E+0")
		}
	}
	return out
}

// s11Strings are JSON string tokens, raw and escaped, valid and not.
func s11Strings() []string {
	raws := []string{"", "a", "\x00", "\x01", "\x1f", "\t", "\n", "\x7f", "\u0080", "\u00e9", "\u2028", "\u2029", "\ufeff", "\ufffd",
		"\uffff", "\U0010ffff", "\U0001f642", "<>&", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80",
		"\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xfe", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x99",
		"\xef\xbb\xbf", "a\xc3(", "日本語"}
	var out []string
	for _, s := range raws {
		out = append(out, `"`+s+`"`)
	}
	out = append(out, `"\""`, `"\\"`, `"\/"`, `"\b"`, `"\f"`, `"\n"`, `"\r"`, `"\t"`, `"\u0041"`, `"\u00e9"`, `"\ud83d\ude42"`,
		`"\ud800"`, `"\udc00"`, `"\u"`, `"\x41"`, `"\a"`, `"\U00000041"`, `"`, `"a`, `"\"`, `'a'`, `""""`, `"\u2028"`)
	return out
}

func s11Values() []string {
	v := append(s11Numbers(), s11Strings()...)
	return append(v, "true", "false", "null", "tru", "falsey", "TRUE", "True", "nul", "{}", "[]", "[1]", `{"a":1}`, `{"a":-129}`,
		`{"a":1,"a":2}`, `{"A":1}`, `{"f":-0}`, `{"f":3.4028236e38}`, `{"f":3.5e38}`, `{"s":"x","E":{}}`, `{"E":{"x":1}}`, `{"E":{}}`,
		`{"E":[]}`, `{"E":null}`, `{,}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{"a" :1}`, `{ "a":1}`, `{"a":1 }`, "{\"a\":1}\n", `{`, `}`)
}

func TestS11DecodeSingleMembers(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	requirePlain[s11Nums](t)
	took, total := 0, 0
	for _, name := range s11Names {
		for _, v := range s11Values() {
			for _, doc := range []string{
				`{"` + name + `":` + v + `}`,
				`{"s":"x","` + name + `":` + v + `,"b":true}`,
				`{"In":{"` + name + `":` + v + `}}`,
				`{"In":{"s":"","` + name + `":` + v + `},"i":1}`,
			} {
				total++
				if s11CheckDecode[s11Nums](t, []byte(doc)) {
					took++
				}
			}
		}
	}
	t.Logf("%d of %d documents taken", took, total)
	assert.Greater(t, took, 500)
}

func TestS11DecodeTwoMembers(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	names := []string{"i", "u8", "f32", "f64", "s", "b", "In", "I", "x"}
	values := []string{"0", "-0", "1", "-1", "255", "256", "1.5", "3.4028236e38", "1e400", `"a"`, `"\n"`, "true", "null", "{}", `{"a":1}`}
	took := 0
	for _, n1 := range names {
		for _, v1 := range values {
			for _, n2 := range names {
				for _, v2 := range values {
					if s11CheckDecode[s11Nums](t, []byte(`{"`+n1+`":`+v1+`,"`+n2+`":`+v2+`}`)) {
						took++
					}
				}
			}
		}
	}
	assert.Greater(t, took, 300)
}

// Every float32 boundary: the midpoints between neighbouring float32
// values, written exactly and a hair to either side, around the edges of
// the normal and subnormal ranges and at random.
func TestS11DecodeFloat32Midpoints(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	r := rand.New(rand.NewPCG(11, 11))
	var bits []uint32
	for _, b := range []uint32{0, 1, 2, 0x007fffff, 0x00800000, 0x00800001, 0x3f800000, 0x4b7fffff, 0x4b800000, 0x7f7ffffe, 0x7f7fffff} {
		bits = append(bits, b, b|1<<31)
	}
	for range 3000 {
		bits = append(bits, r.Uint32()&^(0xff<<23)|uint32(r.IntN(255))<<23)
	}
	took := 0
	for _, b := range bits {
		lo := float64(math.Float32frombits(b))
		hi := float64(math.Float32frombits(b + 1)) // may be +Inf past the largest
		if b&0x7fffffff == 0x7f7fffff {
			hi = float64(math.MaxFloat32) + (float64(math.MaxFloat32) - float64(math.Float32frombits(b-1)))
			if b>>31 != 0 {
				hi = -hi
			}
		}
		mid := new(big.Float).SetPrec(2000).Add(new(big.Float).SetFloat64(lo), new(big.Float).SetFloat64(hi))
		mid.Quo(mid, big.NewFloat(2))
		for _, s := range []string{mid.Text('e', -1), mid.Text('e', 40), mid.Text('e', 8), mid.Text('g', 9),
			strconv.FormatFloat(lo, 'e', -1, 32), strconv.FormatFloat(lo, 'e', -1, 64), strconv.FormatFloat(lo, 'f', -1, 64)} {
			for _, doc := range []string{`{"f32":` + s + `}`, `{"In":{"f":` + s + `}}`, `{"f64":` + s + `}`} {
				if s11CheckDecode[s11Nums](t, []byte(doc)) {
					took++
				}
			}
		}
	}
	assert.Greater(t, took, 10000)
}

// Every integer from -1000 to 1000 into every integer width, and around
// each width's edges.
func TestS11DecodeIntegers(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	names := []string{"i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "nm"}
	check := func(n string) {
		for _, name := range names {
			s11CheckDecode[s11Nums](t, []byte(`{"`+name+`":`+n+`}`))
		}
	}
	for n := -1000; n <= 1000; n++ {
		check(strconv.Itoa(n))
	}
	for _, edge := range []int64{math.MaxInt16, math.MinInt16, math.MaxUint16, math.MaxInt32, math.MinInt32, math.MaxUint32} {
		for d := int64(-3); d <= 3; d++ {
			check(strconv.FormatInt(edge+d, 10))
		}
	}
	for d := uint64(0); d < 5; d++ {
		check(strconv.FormatUint(math.MaxUint64-d, 10))
		check(strconv.FormatUint(math.MaxInt64-2+d, 10))
		check("-" + strconv.FormatUint(math.MaxInt64-2+d, 10))
	}
}

// Every one- and two-byte string, every three-byte sequence after the
// leads E0, E2, ED and EF whose two bytes are continuation bytes or just
// outside them (and random others), and random four-byte ones, raw in a
// string.
func TestS11DecodeStringBytes(t *testing.T) {
	race.Outside(t) // hundreds of thousands of decodes from one goroutine
	took := 0
	check := func(s string) {
		if s11CheckDecode[s11Nums](t, []byte(`{"s":"`+s+`"}`)) {
			took++
			got, _ := codec.PlainDecode[s11Nums]([]byte(`{"s":"` + s + `"}`))
			require.True(t, utf8.ValidString(got.S))
		}
	}
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	r := rand.New(rand.NewPCG(12, 12))
	for _, a := range []int{0xe0, 0xe2, 0xed, 0xef} { // overlongs, U+2028, surrogates, BOM and U+FFFx
		for b := 0x7e; b <= 0xc1; b++ {
			for c := 0x7e; c <= 0xc1; c++ {
				check(string([]byte{byte(a), byte(b), byte(c)}))
			}
		}
		for range 5_000 {
			check(string([]byte{byte(a), byte(r.IntN(256)), byte(r.IntN(256))}))
		}
	}
	for range 30_000 {
		check(string([]byte{byte(0xf0 + r.IntN(16)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}))
	}
	t.Logf("%d strings taken", took)
}

// A valid document, cut at every length, and with every byte replaced by
// every byte, or inserted before every byte.
func TestS11DecodeMutations(t *testing.T) {
	race.Outside(t) // a hundred thousand decodes from one goroutine
	v := s11Nums{I: -1, I8: -128, I16: 32767, I32: 5, I64: math.MinInt64, U: 9, U8: 255, U16: 1, U32: math.MaxUint32,
		U64: math.MaxUint64, F32: -1.5e-7, F64: 1e21, S: "héllo ~\x7f", B: true, Nm: 3}
	v.In.A, v.In.F, v.In.S = 1, float32(math.Copysign(0, -1)), "x"
	data, err := json.Marshal(v)
	require.NoError(t, err)
	got, ok := codec.PlainDecode[s11Nums](data)
	require.True(t, ok, "%s", data)
	require.True(t, s11SameValues(v, got))
	took := 0
	for i := range len(data) + 1 {
		s11CheckDecode[s11Nums](t, data[:i])
		for b := range 256 {
			m := append([]byte(nil), data...)
			if i < len(m) {
				m[i] = byte(b)
				if s11CheckDecode[s11Nums](t, m) {
					took++
				}
			}
			ins := append(append(append([]byte(nil), data[:i]...), byte(b)), data[i:]...)
			if s11CheckDecode[s11Nums](t, ins) {
				took++
			}
		}
	}
	t.Logf("%s: %d mutations taken", data, took)
}

// The bytes the plain codec reads must be data's: nothing past its end,
// even when data is a prefix of a larger array.
func TestS11DecodeReadsNothingPastTheEnd(t *testing.T) {
	full := []byte(`{"i":12,"s":"ab","b":true,"f64":1.5e3}`)
	for i := range len(full) {
		prefix := full[:i:i] // no capacity to read past
		s11CheckDecode[s11Nums](t, prefix)
		withCap := full[:i]
		_, ok := codec.PlainDecode[s11Nums](withCap)
		assert.False(t, ok, "%q is truncated", withCap)
	}
	_, ok := codec.PlainDecode[s11Nums](nil)
	assert.False(t, ok)
}
