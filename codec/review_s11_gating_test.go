//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests check the plain codec refuses
package codec_test

import (
	"encoding/json"
	"log/slog"
	"math"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// Types a plain codec must not exist for (promise 3), and plain types that
// look odd but whose plain codec must still agree with encoding/json.

type s11Int int
type s11Float float64

type s11MJ int

func (s11MJ) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type s11MJPtr int

func (*s11MJPtr) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type s11UJ struct{ A int }

func (*s11UJ) UnmarshalJSON([]byte) error { return nil }

type s11MT string

func (s11MT) MarshalText() ([]byte, error) { return []byte("t"), nil }

type s11UT uint8

func (*s11UT) UnmarshalText([]byte) error { return nil }

type s11AT bool

func (s11AT) AppendText(b []byte) ([]byte, error) { return b, nil }

type s11IZ int

func (s11IZ) IsZero() bool { return true }

type s11IZPtr struct{ A int }

func (*s11IZPtr) IsZero() bool { return true }

// The top type itself has methods.
type s11TopMJ struct{ A int }

func (s11TopMJ) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }

type s11TopUJPtr struct{ A int }

func (*s11TopUJPtr) UnmarshalJSON([]byte) error { return nil }

type s11Emb struct{ A int }

type s11Gen[T any] struct {
	V T `json:"v"`
	W int
}

type s11Alias = s11Emb

type s11Fields65 struct {
	F00, F01, F02, F03, F04, F05, F06, F07, F08, F09 int8
	F10, F11, F12, F13, F14, F15, F16, F17, F18, F19 int8
	F20, F21, F22, F23, F24, F25, F26, F27, F28, F29 int8
	F30, F31, F32, F33, F34, F35, F36, F37, F38, F39 int8
	F40, F41, F42, F43, F44, F45, F46, F47, F48, F49 int8
	F50, F51, F52, F53, F54, F55, F56, F57, F58, F59 int8
	F60, F61, F62, F63, F64                          int8
}

type s11Fields64 struct {
	F00, F01, F02, F03, F04, F05, F06, F07, F08, F09 int8
	F10, F11, F12, F13, F14, F15, F16, F17, F18, F19 int8
	F20, F21, F22, F23, F24, F25, F26, F27, F28, F29 int8
	F30, F31, F32, F33, F34, F35, F36, F37, F38, F39 int8
	F40, F41, F42, F43, F44, F45, F46, F47, F48, F49 int8
	F50, F51, F52, F53, F54, F55, F56, F57, F58, F59 int8
	F60, F61, F62                                    int8
	Last                                             uint64 `json:"last,omitempty"`
}

func TestS11NotPlain(t *testing.T) {
	type embedded struct{ s11Emb }
	type embeddedAlias struct{ s11Alias }
	type embeddedNamedInt struct{ s11Int }
	_ = embeddedNamedInt{}.s11Int
	type embeddedTagged struct {
		s11Emb `json:"e"`
	}
	type unexported struct {
		A int
		b int
	}
	_ = unexported{}.b
	type blank struct {
		A int
		_ int
	}
	type dash struct {
		A int `json:"-"`
	}
	type dashComma struct {
		A int `json:"-,"`
	}
	type dashOmit struct {
		A int `json:"-,omitempty"`
	}
	type str struct {
		A int `json:",string"`
	}
	type omitzero struct {
		A int `json:"a,omitzero"`
	}
	type omitBoth struct {
		A int `json:"a,omitempty,omitzero"`
	}
	type omitString struct {
		A int `json:"a,omitempty,string"`
	}
	type omitTrailing struct {
		A int `json:"a,omitempty,"`
	}
	type unknownOpt struct {
		A int `json:"a,inline"`
	}
	type omitF32 struct {
		F float32 `json:",omitempty"`
	}
	type omitF64 struct {
		F float64 `json:"f,omitempty"`
	}
	type omitNamedFloat struct {
		F s11Float `json:"f,omitempty"`
	}
	type omitZeroStruct struct {
		S struct{ F float64 } `json:"s,omitzero"`
	}
	dup := reflect.StructOf([]reflect.StructField{ // built so, for go vet's structtag
		{Name: "A", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
		{Name: "B", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
	})
	type caseDup struct {
		A int `json:"x"`
		B int `json:"X"`
	}
	type nameVsTag struct {
		A int
		B int `json:"a"`
	}
	type kelvinDup struct {
		K int `json:"k"`
		L int `json:"\u212a"` // KELVIN SIGN folds to k
	}
	type kelvinFieldDup struct {
		K int // ASCII
		K int // U+212A KELVIN SIGN
	}
	type dotlessDup struct {
		I int
		İ int // U+0130, ToLower is i
	}
	type longS struct {
		A int `json:"\u017f"` // LATIN SMALL LETTER LONG S folds to s
	}
	type badName struct {
		A int `json:"a b"`
	}
	type quoteName struct {
		A int `json:"a\\b"`
	}
	type nonASCIIName struct {
		É int
	}
	type number struct{ N json.Number }
	type raw struct{ R json.RawMessage }
	type uptr struct{ U uintptr }
	type cplx struct{ C complex64 }
	type iface struct{ I any }
	type ptr struct{ P *int }
	type slice struct{ S []int }
	type bytes struct{ B []byte }
	type mp struct{ M map[string]int }
	type array struct{ A [2]int }
	type array0 struct{ A [0]int }
	type nestedArray struct{ S struct{ A [1]bool } }
	type tm struct{ T time.Time }
	type level struct{ L slog.Level } // int with MarshalJSON and MarshalText
	type addr struct{ A netip.Addr }
	type mutex struct{ M sync.Mutex }
	type mj struct{ V s11MJ }
	type mjPtr struct{ V s11MJPtr }
	type uj struct{ V s11UJ }
	type mt struct{ V s11MT }
	type ut struct{ V s11UT }
	type at struct{ V s11AT }
	type iz struct{ V s11IZ }
	type izPtr struct{ V s11IZPtr }
	type deep struct {
		A struct{ B struct{ C struct{ D []int } } }
	}
	type deepMethod struct{ A struct{ B struct{ V s11MT } } }
	for _, typ := range []reflect.Type{
		reflect.TypeFor[int](), reflect.TypeFor[string](), reflect.TypeFor[*s11Emb](), reflect.TypeFor[[1]s11Emb](),
		reflect.TypeFor[map[string]int](), reflect.TypeFor[any](),
		reflect.TypeFor[embedded](), reflect.TypeFor[embeddedAlias](), reflect.TypeFor[embeddedNamedInt](), reflect.TypeFor[embeddedTagged](),
		reflect.TypeFor[unexported](), reflect.TypeFor[blank](), reflect.TypeFor[dash](), reflect.TypeFor[dashComma](),
		reflect.TypeFor[dashOmit](), reflect.TypeFor[str](), reflect.TypeFor[omitzero](), reflect.TypeFor[omitBoth](),
		reflect.TypeFor[omitString](), reflect.TypeFor[omitTrailing](), reflect.TypeFor[unknownOpt](),
		reflect.TypeFor[omitF32](), reflect.TypeFor[omitF64](), reflect.TypeFor[omitNamedFloat](), reflect.TypeFor[omitZeroStruct](),
		dup, reflect.TypeFor[caseDup](), reflect.TypeFor[nameVsTag](), reflect.TypeFor[kelvinDup](),
		reflect.TypeFor[kelvinFieldDup](), reflect.TypeFor[dotlessDup](), reflect.TypeFor[longS](), reflect.TypeFor[badName](),
		reflect.TypeFor[quoteName](), reflect.TypeFor[nonASCIIName](),
		reflect.TypeFor[number](), reflect.TypeFor[raw](), reflect.TypeFor[uptr](), reflect.TypeFor[cplx](), reflect.TypeFor[iface](),
		reflect.TypeFor[ptr](), reflect.TypeFor[slice](), reflect.TypeFor[bytes](), reflect.TypeFor[mp](), reflect.TypeFor[array](),
		reflect.TypeFor[array0](), reflect.TypeFor[nestedArray](), reflect.TypeFor[tm](), reflect.TypeFor[level](), reflect.TypeFor[addr](),
		reflect.TypeFor[mutex](), reflect.TypeFor[mj](), reflect.TypeFor[mjPtr](), reflect.TypeFor[uj](), reflect.TypeFor[mt](),
		reflect.TypeFor[ut](), reflect.TypeFor[at](), reflect.TypeFor[iz](), reflect.TypeFor[izPtr](),
		reflect.TypeFor[deep](), reflect.TypeFor[deepMethod](),
		reflect.TypeFor[s11TopMJ](), reflect.TypeFor[s11TopUJPtr](), reflect.TypeFor[s11UJ](), reflect.TypeFor[s11IZPtr](),
		reflect.TypeFor[s11Fields65](), reflect.TypeFor[struct{ In s11Fields65 }](),
		reflect.TypeFor[s11Gen[slog.Level]](), reflect.TypeFor[s11Gen[[]int]](), reflect.TypeFor[s11Gen[s11MJPtr]](),
		reflect.TypeFor[s11Gen[float64]]().Field(0).Type, // float64 itself
		reflect.TypeFor[s11Gen[complex128]](),
	} {
		assert.False(t, codec.IsPlain(typ), "%s must not be plain", typ)
	}
}

// Plain types at the edges of what is allowed: each must be plain, and its
// plain codec must agree with encoding/json on a few values each way.
type s11Kelvin struct {
	K int `json:"K"` // tag is U+212A KELVIN SIGN
	S string
}

type s11KelvinField struct {
	K int // field is U+212A KELVIN SIGN, an exported identifier
}

type s11DotI struct {
	İD int // U+0130, an exported identifier whose ToLower is ASCII
}

type s11Other struct {
	D time.Duration `json:"d,omitempty"`
	M time.Month
	W time.Weekday `json:"w"`
}

type s11ZeroSize struct {
	Z0 struct{}
	A  int8
	Z1 struct{} `json:"z1,omitempty"`
	B  int64
	Z2 struct{}
}

type s11Padding struct {
	A bool
	B int64
	C int8
	D float32
	E uint16
	F float64
	G bool
	H struct {
		A int8
		B float64
		C bool
	}
	I uint8
}

func TestS11PlainEdges(t *testing.T) {
	neg0 := math.Copysign(0, -1)
	check := func(name string, plain bool, encode func() bool, docs ...func() bool) {
		t.Run(name, func(t *testing.T) {
			require.True(t, plain, "plain")
			assert.True(t, encode(), "the plain codec writes it")
			for _, d := range docs {
				d()
			}
		})
	}
	check("kelvin tag", codec.IsPlain(reflect.TypeFor[s11Kelvin]()),
		func() bool { return s11CheckEncode(t, s11Kelvin{K: 3, S: "x"}) },
		func() bool { return s11CheckDecode[s11Kelvin](t, []byte(`{"K":3,"S":"x"}`)) },
		func() bool { return s11CheckDecode[s11Kelvin](t, []byte(`{"K":3,"S":"x"}`)) },
		func() bool { return s11CheckDecode[s11Kelvin](t, []byte(`{"k":3}`)) })
	check("kelvin field", codec.IsPlain(reflect.TypeFor[s11KelvinField]()),
		func() bool { return s11CheckEncode(t, s11KelvinField{K: -1}) },
		func() bool { return s11CheckDecode[s11KelvinField](t, []byte(`{"K":-1}`)) },
		func() bool { return s11CheckDecode[s11KelvinField](t, []byte(`{"K":-1}`)) })
	check("dotted I", codec.IsPlain(reflect.TypeFor[s11DotI]()),
		func() bool { return s11CheckEncode(t, s11DotI{İD: 7}) },
		func() bool { return s11CheckDecode[s11DotI](t, []byte(`{"İD":7}`)) },
		func() bool { return s11CheckDecode[s11DotI](t, []byte(`{"ID":7}`)) },
		func() bool { return s11CheckDecode[s11DotI](t, []byte(`{"id":7}`)) })
	check("other packages' named ints", codec.IsPlain(reflect.TypeFor[s11Other]()),
		func() bool { return s11CheckEncode(t, s11Other{D: time.Second, M: time.December, W: time.Sunday}) },
		func() bool { return s11CheckDecode[s11Other](t, []byte(`{"d":1000000000,"M":12,"w":0}`)) })
	check("zero-size fields", codec.IsPlain(reflect.TypeFor[s11ZeroSize]()),
		func() bool { return s11CheckEncode(t, s11ZeroSize{A: -128, B: math.MinInt64}) },
		func() bool {
			return s11CheckDecode[s11ZeroSize](t, []byte(`{"Z0":{},"A":-128,"z1":{},"B":-9223372036854775808,"Z2":{}}`))
		},
		func() bool { return s11CheckDecode[s11ZeroSize](t, []byte(`{"Z2":{},"B":1}`)) })
	p := s11Padding{A: true, B: -2, C: -3, D: float32(neg0), E: 65535, F: neg0, G: true, I: 255}
	p.H.A, p.H.B, p.H.C = -128, math.SmallestNonzeroFloat64, true
	check("padding", codec.IsPlain(reflect.TypeFor[s11Padding]()),
		func() bool { return s11CheckEncode(t, p) },
		func() bool {
			data, err := json.Marshal(p)
			require.NoError(t, err)
			got, ok := codec.PlainDecode[s11Padding](data)
			require.True(t, ok, "%s", data)
			return assert.True(t, s11SameValues(p, got), "%s: %#v", data, got)
		})
	check("generic", codec.IsPlain(reflect.TypeFor[s11Gen[float32]]()),
		func() bool { return s11CheckEncode(t, s11Gen[float32]{V: math.MaxFloat32, W: -1}) },
		func() bool { return s11CheckDecode[s11Gen[float32]](t, []byte(`{"v":3.4028235e38,"W":-1}`)) },
		func() bool { return s11CheckDecode[s11Gen[float32]](t, []byte(`{"v":3.4028236e38,"W":-1}`)) },
		func() bool { return s11CheckDecode[s11Gen[float32]](t, []byte(`{"v":3.40282357e38}`)) })
	check("alias", codec.IsPlain(reflect.TypeFor[s11Alias]()),
		func() bool { return s11CheckEncode(t, s11Alias{A: 1}) },
		func() bool { return s11CheckDecode[s11Alias](t, []byte(`{"A":1}`)) })
	var f64 s11Fields64
	f64.F00, f64.F62, f64.Last = -1, 127, math.MaxUint64
	check("64 fields", codec.IsPlain(reflect.TypeFor[s11Fields64]()),
		func() bool { return s11CheckEncode(t, f64) },
		func() bool {
			data, err := json.Marshal(f64)
			require.NoError(t, err)
			return assert.True(t, s11CheckDecode[s11Fields64](t, data), "%s", data)
		},
		func() bool {
			// The 64th field named twice: bit 63 of seen.
			return assert.False(t, s11CheckDecode[s11Fields64](t, []byte(`{"last":1,"last":2}`)))
		},
		func() bool {
			return assert.True(t, s11CheckDecode[s11Fields64](t, []byte(`{"last":18446744073709551615,"F00":-128}`)))
		})
}
