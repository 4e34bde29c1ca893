package codec_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// The plain codec is held to encoding/json: what it writes, encoding/json
// writes byte for byte, and what it decodes, encoding/json decodes into the
// same value. It may decline anything, but it must take what Cairn's own
// events are made of, or it would spare nothing.

type plainCents int64

type plainInner struct {
	N int8   `json:"n"`
	U uint16 // named by the field
	S string `json:"s,omitempty"`
	B bool
}

type plainEvent struct {
	I     int
	I8    int8  `json:"i8"`
	I16   int16 `json:"i16"`
	I32   int32 `json:"i32,omitempty"`
	I64   int64
	U     uint   `json:"u"`
	U8    uint8  `json:"u8"`
	U16   uint16 `json:"u16"`
	U32   uint32 `json:"u32"`
	U64   uint64 `json:"u64,omitempty"`
	F32   float32
	F64   float64    `json:"f64"`
	S     string     `json:"s"`
	B     bool       `json:"b,omitempty"`
	In    plainInner `json:"in,omitempty"` // omitempty leaves no struct out
	Cents plainCents `json:"cents"`
}

func requirePlain[T any](t testing.TB) {
	t.Helper()
	require.True(t, codec.IsPlain(reflect.TypeFor[T]()), "%s is plain", reflect.TypeFor[T]())
}

func TestPlainCodecsAreForPlainStructsOnly(t *testing.T) {
	type withSlice struct{ A []int }
	type withArray struct{ A [2]int }
	type withPointer struct{ A *int }
	type withTime struct{ At time.Time }
	type quoted struct {
		A int `json:"a,string"`
	}
	type omitZero struct {
		A int `json:"a,omitzero"`
	}
	type embedded struct{ plainInner }
	type unexported struct {
		A int
		b int // encoding/json skips it, and a round trip drops it
	}
	_ = unexported{}.b
	type foldedTwice struct {
		A int
		B int `json:"a"`
	}
	type emptyFloat struct {
		F float64 `json:"f,omitempty"`
	}
	type nested struct{ In withSlice }
	for _, typ := range []reflect.Type{
		reflect.TypeFor[int](), reflect.TypeFor[string](), reflect.TypeFor[[]plainInner](), reflect.TypeFor[withSlice](),
		reflect.TypeFor[withArray](), reflect.TypeFor[withPointer](), reflect.TypeFor[withTime](), reflect.TypeFor[quoted](),
		reflect.TypeFor[omitZero](), reflect.TypeFor[embedded](), reflect.TypeFor[unexported](), reflect.TypeFor[foldedTwice](),
		reflect.TypeFor[emptyFloat](), reflect.TypeFor[nested](), reflect.TypeFor[json.RawMessage](),
	} {
		assert.False(t, codec.IsPlain(typ), "%s is not plain", typ)
	}
	requirePlain[plainEvent](t)
	requirePlain[plainInner](t)
	requirePlain[struct{}](t)
}

// randomPlain returns a plainEvent whose values come from the edges of
// their types as often as from the middle, and whose strings hold what
// encoding/json escapes as often as what it does not.
func randomPlain(r *rand.Rand) plainEvent {
	pick := func(edges ...int64) int64 {
		if r.IntN(2) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return r.Int64() >> r.IntN(64)
	}
	upick := func(edges ...uint64) uint64 {
		if r.IntN(2) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return r.Uint64() >> r.IntN(64)
	}
	return plainEvent{
		I:     int(pick(0, 1, -1, math.MinInt, math.MaxInt)),
		I8:    int8(pick(0, -1, math.MinInt8, math.MaxInt8)),
		I16:   int16(pick(0, math.MinInt16, math.MaxInt16)),
		I32:   int32(pick(0, math.MinInt32, math.MaxInt32)),
		I64:   pick(0, math.MinInt64, math.MaxInt64),
		U:     uint(upick(0, math.MaxUint)),
		U8:    uint8(upick(0, math.MaxUint8)),
		U16:   uint16(upick(0, math.MaxUint16)),
		U32:   uint32(upick(0, math.MaxUint32)),
		U64:   upick(0, math.MaxUint64),
		F32:   float32(randomFloat(r)),
		F64:   randomFloat(r),
		S:     randomString(r),
		B:     r.IntN(2) == 0,
		In:    plainInner{N: int8(pick(0, math.MinInt8)), U: uint16(upick(0, 1)), S: randomString(r), B: r.IntN(2) == 0},
		Cents: plainCents(pick(0, -100, math.MaxInt64)),
	}
}

func randomFloat(r *rand.Rand) float64 {
	edges := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 9.999e20, 5e-324, math.MaxFloat64,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 0.1, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1), 123456789012345678}
	switch r.IntN(3) {
	case 0:
		return edges[r.IntN(len(edges))]
	case 1:
		return math.Float64frombits(r.Uint64())
	}
	return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
}

func randomString(r *rand.Rand) string {
	alphabet := []string{"a", "Z", "0", " ", "~", "\x7f", "é", "日本", "🙂", "<", ">", "&", `"`, `\`, "\n", "\x00", "\x1f", "\u2028", "\u2029", "\xff", "\xe2\x82"}
	var b strings.Builder
	for range r.IntN(12) {
		if r.IntN(3) == 0 {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

// plainEscapes reports whether encoding/json escapes something in v's
// strings, or refuses v (a NaN or infinite float): the values the plain
// codec declines to write.
func plainEscapes(v plainEvent) bool {
	bad := func(s string) bool {
		return strings.ContainsAny(s, "<>&\"\\\u2028\u2029") || strings.ToValidUTF8(s, "") != s ||
			strings.IndexFunc(s, func(r rune) bool { return r < 0x20 }) >= 0
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	return bad(v.S) || bad(v.In.S) || !finite(v.F64) || !finite(float64(v.F32))
}

// samePlain reports whether two decoded values are the same, a -0 apart
// from a 0 (encoding tells them apart; no NaN decodes).
func samePlain(t testing.TB, a, b plainEvent) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	require.NoError(t, err)
	jb, err := json.Marshal(b)
	require.NoError(t, err)
	return reflect.DeepEqual(a, b) && string(ja) == string(jb)
}

// requireWritesLikeEncodingJSON requires the plain codec to write v
// exactly when encoding/json writes it without escaping anything, and then
// the same bytes; it returns what the codec wrote, if anything.
func requireWritesLikeEncodingJSON(t testing.TB, v plainEvent) ([]byte, bool) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, ok := codec.PlainEncode(v)
	if wantErr != nil {
		require.False(t, ok, "%#v: encoding/json refuses it (%v)", v, wantErr)
		return nil, false
	}
	require.Equal(t, !plainEscapes(v), ok, "%#v (encoding/json writes %s)", v, want)
	if ok {
		require.Equal(t, string(want), string(got), "%#v", v)
	}
	return got, ok
}

func TestPlainCodecWritesWhatEncodingJSONWrites(t *testing.T) {
	requirePlain[plainEvent](t)
	r := rand.New(rand.NewPCG(1, 2))
	took := 0
	for range 20_000 {
		if _, ok := requireWritesLikeEncodingJSON(t, randomPlain(r)); ok {
			took++
		}
	}
	assert.Greater(t, took, 1_000, "values the plain codec wrote")
}

func TestPlainCodecDecodesWhatEncodingJSONWrites(t *testing.T) {
	requirePlain[plainEvent](t)
	r := rand.New(rand.NewPCG(3, 4))
	took := 0
	for range 20_000 {
		v := randomPlain(r)
		data, err := json.Marshal(v)
		if err != nil {
			continue
		}
		var want plainEvent
		require.NoError(t, json.Unmarshal(data, &want))
		got, ok := codec.PlainDecode[plainEvent](data)
		escaped := strings.Contains(string(data), `\`)
		require.Equal(t, !escaped, ok, "%s", data)
		if ok {
			took++
			require.True(t, samePlain(t, want, got), "%s:\nencoding/json %#v\nplain         %#v", data, want, got)
		}
	}
	assert.Greater(t, took, 1_000, "documents the plain codec decoded")
}

// requireDecodesLikeEncodingJSON requires the plain codec to decode data
// only into what encoding/json decodes it into, and without error.
func requireDecodesLikeEncodingJSON(t testing.TB, data []byte) bool {
	t.Helper()
	got, ok := codec.PlainDecode[plainEvent](data)
	if !ok {
		return false
	}
	var want plainEvent
	require.NoError(t, json.Unmarshal(data, &want), "the plain codec decodes %q into %#v", data, got)
	require.True(t, samePlain(t, want, got), "%q:\nencoding/json %#v\nplain         %#v", data, want, got)
	return true
}

// plainDocs writes documents near what the plain codec takes: members
// named as the fields are, in another case, or not at all, twice, with
// values of every JSON kind, numbers at and past the edges of the fields'
// ranges, strings with escapes, and whitespace.
func plainDocs(r *rand.Rand) string {
	names := []string{"I", "i8", "i16", "i32", "I64", "u", "u8", "u16", "u32", "u64", "F32", "f64", "s", "b", "cents", "in",
		"n", "U", "S", "B", "i", "I8", "F64", "x", "IN", "Cents"}
	values := []string{"0", "-0", "1", "-1", "127", "128", "-128", "-129", "255", "256", "32767", "-32768", "65535", "65536",
		"2147483647", "-2147483648", "4294967295", "4294967296", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "18446744073709551615", "18446744073709551616", "1.5", "1e2", "1E+2", "-1e-2", "0.0",
		"01", "1.", ".5", "-", "3.4028235e38", "3.5e38", "1e400", "1e-400", "true", "false", "null", "tru", `""`, `"a"`,
		`"\u00e9"`, `"\n"`, `"é"`, "\"\xff\"", `"<"`, "\"\x01\"", `{}`, `[]`, `{"n":1}`, `{"N":1}`, `{"n":-129}`, `{"s":"x","B":true}`}
	g := randomDoc{names: names, values: values, maxDepth: 2, leafOdds: 2, arrayOdds: 20, members: 6,
		quote: func(s string) string { return `"` + s + `"` }}
	doc := g.write(r, 0)
	if r.IntN(4) == 0 {
		doc = broken(r, doc)[r.IntN(7)]
	}
	return doc
}

func TestPlainCodecDecodesOnlyAsEncodingJSONDoes(t *testing.T) {
	requirePlain[plainEvent](t)
	r := rand.New(rand.NewPCG(5, 6))
	took := 0
	for range 50_000 {
		if requireDecodesLikeEncodingJSON(t, []byte(plainDocs(r))) {
			took++
		}
	}
	assert.Greater(t, took, 1_000, "documents the plain codec decoded")
}

func FuzzPlainDecodesOnlyAsEncodingJSONDoes(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 64 {
		f.Add([]byte(plainDocs(r)))
		if data, err := json.Marshal(randomPlain(r)); err == nil {
			f.Add(data)
		}
	}
	requirePlain[plainEvent](f)
	f.Fuzz(func(t *testing.T, data []byte) { requireDecodesLikeEncodingJSON(t, data) })
}

func FuzzPlainWritesWhatEncodingJSONWrites(f *testing.F) {
	f.Add("a", "<", int64(-1), uint64(1), 1.5, float32(-0.25))
	f.Add("\u2028", "\xff", int64(math.MinInt64), uint64(math.MaxUint64), 1e21, float32(1e-7))
	requirePlain[plainEvent](f)
	f.Fuzz(func(t *testing.T, s, inner string, i int64, u uint64, f64 float64, f32 float32) {
		v := plainEvent{I: int(i), I8: int8(i), I16: int16(i), I32: int32(i), I64: i, U: uint(u), U8: uint8(u), U16: uint16(u),
			U32: uint32(u), U64: u, F32: f32, F64: f64, S: s, B: i%2 == 0, In: plainInner{N: int8(u), U: uint16(i), S: inner}, Cents: plainCents(-i)}
		got, ok := requireWritesLikeEncodingJSON(t, v)
		if !ok {
			return
		}
		back, ok := codec.PlainDecode[plainEvent](got)
		require.True(t, ok, "%s", got)
		require.True(t, samePlain(t, v, back), "%s", got)
	})
}
