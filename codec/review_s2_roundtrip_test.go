package codec_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// RVExact is a type the registry deems exact (Registry.RoundTrip returns
// the value in hand): Save applies it without decoding, so the decoder
// must give it back bit for bit (floats included, -0 and all).
type RVExact struct {
	F   float64    `json:"f"`
	FS  float64    `json:"fs,string"`
	G   float32    `json:"g"`
	GS  float32    `json:"gs,string"`
	S   string     `json:"s"`
	SS  string     `json:"ss,string"`
	I   int64      `json:"i,string"`
	U   uint64     `json:"u"`
	B   bool       `json:"b,string"`
	Arr [2]float64 `json:"arr"`
	In  RVExactIn  `json:"in"`
}

type RVExactIn struct {
	Name string `json:"Name"`
	X    int8   `json:"x_1"`
}

func rvFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return math.Copysign(0, -1)
	case 1:
		return math.SmallestNonzeroFloat64 * float64(r.IntN(100))
	case 2:
		return math.MaxFloat64 / float64(1+r.IntN(5))
	case 3:
		return float64(r.Int64()) * math.Pow(10, float64(r.IntN(40)-20))
	case 4:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7fe))<<52)
	default:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(600)-300))
	}
}

func rvString(r *rand.Rand) string {
	parts := []string{"a", "<", ">", "&", "\u2028", "\u2029", "\x7f", "\x00", "\t", "\"", "\\", "/", "é", "😀", "\ufffd", "\ufeff", " ", "null", "\\u0041", "'"}
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func TestReviewS2RoundTripIsExactOnNewDecoder(t *testing.T) {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[RVExact](reg, "rv.exact", 1))
	require.NoError(t, reg.Validate())
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		f32 := float32(rvFloat(r))
		if math.IsInf(float64(f32), 0) {
			f32 = -0
		}
		v := RVExact{F: rvFloat(r), FS: rvFloat(r), G: f32, GS: float32(r.NormFloat64()), S: rvString(r), SS: rvString(r),
			I: r.Int64() - r.Int64(), U: r.Uint64(), B: r.IntN(2) == 0, Arr: [2]float64{rvFloat(r), math.Copysign(0, -1)},
			In: RVExactIn{Name: rvString(r), X: int8(r.IntN(256) - 128)}}
		got, exact := reg.RoundTrip(v)
		require.True(t, exact)
		data, err := json.Marshal(got)
		require.NoError(t, err)
		var dec RVExact
		require.NoError(t, codec.JSON{}.Unmarshal(data, &dec), "%s", data)
		var std RVExact
		require.NoError(t, json.Unmarshal(data, &std), "%s", data)
		require.True(t, bitsEqual(reflect.ValueOf(v), reflect.ValueOf(dec)), "codec.JSON: %s\nin:  %#v\nout: %#v", data, v, dec)
		require.True(t, bitsEqual(reflect.ValueOf(v), reflect.ValueOf(std)), "encoding/json: %s\nin:  %#v\nout: %#v", data, v, std)
	}
}
