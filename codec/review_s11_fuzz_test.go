package codec_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// go test -run '^$' -fuzz '^FuzzS11PlainDecode$' -fuzztime 120s ./codec/
func FuzzS11PlainDecode(f *testing.F) {
	v := s11Nums{I: -1, I8: -128, I16: 32767, I32: 5, I64: math.MinInt64, U: 9, U8: 255, U16: 1, U32: math.MaxUint32,
		U64: math.MaxUint64, F32: -1.5e-7, F64: 1e21, S: "héllo ~\x7f\u2028", B: true, Nm: 3}
	v.In.A, v.In.F, v.In.S = 1, float32(math.Copysign(0, -1)), "x"
	data, err := json.Marshal(v)
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte(`{"f32":3.4028235e38,"f64":-0,"In":{"f":1e-46}}`))
	f.Add([]byte(`{"i8":-128,"u8":255,"u64":18446744073709551615,"s":"\xed\xa0\x80"}`))
	f.Add([]byte(`{}`))
	for _, n := range s11Names[:16] {
		for _, val := range []string{"0", "-0", "1e2", `"a"`, "true", "{}"} {
			f.Add([]byte(`{"` + n + `":` + val + `}`))
		}
	}
	requirePlain[s11Nums](f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s11CheckDecode[s11Nums](t, data)
		s11CheckDecode[s11Floats](t, data)
		s11CheckDecode[s11Ints](t, data)
	})
}

// go test -run '^$' -fuzz '^FuzzS11PlainEncode$' -fuzztime 120s ./codec/
func FuzzS11PlainEncode(f *testing.F) {
	f.Add("a", "<", uint64(1), uint32(0x80000000), uint64(0x8000000000000000), true)
	f.Add("\u2028", "\xed\xa0\x80", uint64(math.MaxUint64), uint32(0x7f7fffff), math.Float64bits(1e21), false)
	f.Add("\x7f", "\ufeff", uint64(0x80), uint32(0x358637bd), math.Float64bits(1e-6), false)
	requirePlain[s11Nums](f)
	f.Fuzz(func(t *testing.T, s, inner string, n uint64, f32 uint32, f64 uint64, b bool) {
		v := s11Nums{I: int(n), I8: int8(n), I16: int16(n >> 8), I32: int32(n >> 16), I64: int64(n), U: uint(n >> 3), U8: uint8(n >> 5),
			U16: uint16(n >> 7), U32: uint32(n >> 11), U64: n, F32: math.Float32frombits(f32), F64: math.Float64frombits(f64), S: s, B: b,
			Nm: s11Int(^n)}
		v.In.A, v.In.F, v.In.S = int8(n>>13), math.Float32frombits(uint32(f64)), inner
		if s11CheckEncode(t, v) {
			got, _ := codec.PlainEncode(v)
			back, ok := codec.PlainDecode[s11Nums](got)
			require.True(t, ok, "%s", got)
			require.True(t, s11SameValues(v, back), "%s", got)
		} else if _, err := json.Marshal(v); err == nil {
			// Declined: only a string encoding/json escapes is a reason.
			_, ok := codec.PlainEncode(s11Nums{F32: v.F32, F64: v.F64, In: s11Inner{F: v.In.F}})
			require.True(t, ok)
		}
		ints := s11Ints{I: int(n), I8: int8(n), U64: n, S: inner, B: b}
		s11CheckEncode(t, ints)
	})
}
