//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// Review (S2) of the JSON serializer's decoder: a differential test of
// codec.JSON{}.Unmarshal against encoding/json.Unmarshal on the corners of
// encoding/json's rules, into a fresh zero value of each target type.

// rvFrom implements the v2 interface UnmarshalJSONFrom (go-json-experiment's
// jsontext), which encoding/json (Go 1.26, no jsonv2 experiment) ignores.
type rvFrom struct{ V string }

func (r *rvFrom) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	r.V = "from-v2-method"
	return nil
}

// rvKeyJSON is a string-kinded map key with UnmarshalJSON (ignored for keys by v1).
type rvKeyJSON string

func (k *rvKeyJSON) UnmarshalJSON(b []byte) error { *k = rvKeyJSON("method:" + string(b)); return nil }

// rvKeyText is an int-kinded map key with UnmarshalText (preferred by v1).
type rvKeyText int

func (k *rvKeyText) UnmarshalText(b []byte) error { *k = rvKeyText(len(b)); return nil }

// rvTextVal has UnmarshalText on a value receiver (useless, but legal).
type rvTextVal struct{ N int }

func (rvTextVal) UnmarshalText([]byte) error { return nil }

// rvByte is a named byte with UnmarshalText.
type rvByte byte

func (b *rvByte) UnmarshalText(t []byte) error { *b = rvByte(len(t)); return nil }

type rvPlainByte uint8
type rvBytes []byte
type rvNumber json.Number

type rvinner struct{ X int }
type RVExported struct{ Y int }

type rvEmbedPtrUnexported struct {
	*rvinner
	Z int
}

type rvEmbedPtrExported struct {
	*RVExported
	Z int
}

type RVDeepA struct{ Name string }
type RVDeepB struct{ RVDeepA }
type RVShallow struct{ Name string }
type rvConflict struct {
	RVDeepB   // Name at depth 2
	RVShallow // Name at depth 1: wins
}
type RVTagged struct {
	Name string `json:"name"`
}
type rvTagDominance struct {
	RVTagged  // tagged "name" at depth 1
	RVShallow // untagged "Name" at depth 1: same folded name, but names differ; v1 matches exact first
}

type rvTags struct {
	Quote  int `json:"a'b"`
	Slash  int `json:"a\\b"`
	Emoji  int `json:"😀"`
	Greek  int `json:"αβγ"`
	Space  int `json:"a b"`
	Comma  int `json:","`
	Dash   int `json:"-,omitempty"`
	Empty  int `json:""`
	Pct    int `json:"%x"`
	Ctrl   int `json:"a\tb"`
	Kelvin int `json:"\u212a"`
	Long   int `json:"ſ"`
}

type rvStrings struct {
	B   bool           `json:"b,string"`
	I   int            `json:"i,string"`
	U8  uint8          `json:"u8,string"`
	F   float32        `json:"f,string"`
	S   string         `json:"s,string"`
	PI  *int           `json:"pi,string"`
	PPI **int          `json:"ppi,string"`
	N   json.Number    `json:"n,string"`
	PN  *json.Number   `json:"pn,string"`
	A   any            `json:"a,string"`
	Sl  []int          `json:"sl,string"`
	M   map[string]int `json:"m,string"`
	T   time.Time      `json:"t,string"`
	D   time.Duration  `json:"d,string"`
}

type rvNums struct {
	N  json.Number            `json:"n"`
	PN *json.Number           `json:"pn"`
	L  []json.Number          `json:"l"`
	M  map[string]json.Number `json:"m"`
	K  map[json.Number]int    `json:"k"`
	RN rvNumber               `json:"rn"`
}

type rvMaps struct {
	I   map[int]int                `json:"i"`
	I8  map[int8]int               `json:"i8"`
	U   map[uint]int               `json:"u"`
	U64 map[uint64]int             `json:"u64"`
	S   map[rvNumber]int           `json:"s"`
	KJ  map[rvKeyJSON]int          `json:"kj"`
	KT  map[rvKeyText]int          `json:"kt"`
	F   map[float64]int            `json:"f"`
	B   map[bool]int               `json:"b"`
	R   map[string]json.RawMessage `json:"r"`
	MS  map[string]RVShallow       `json:"ms"`
}

type rvMisc struct {
	From  rvFrom          `json:"from"`
	PFrom *rvFrom         `json:"pfrom"`
	TV    rvTextVal       `json:"tv"`
	Bytes []byte          `json:"bytes"`
	RB    rvBytes         `json:"rb"`
	PB    []rvPlainByte   `json:"pb"`
	TB    []rvByte        `json:"tb"`
	Arr   [3]byte         `json:"arr"`
	At    time.Time       `json:"at"`
	PAt   *time.Time      `json:"pat"`
	Dur   time.Duration   `json:"dur"`
	Big   *big.Int        `json:"big"`
	BigV  big.Int         `json:"bigv"`
	Raw   json.RawMessage `json:"raw"`
	Fix   [2]int          `json:"fix"`
	Sl    []int           `json:"sl"`
	Map   map[string]int  `json:"map"`
	Ptr   *RVShallow      `json:"ptr"`
	Any   any             `json:"any"`
	F32   float32         `json:"f32"`
	I8    int8            `json:"i8"`
	U64   uint64          `json:"u64"`
	Uptr  uintptr         `json:"uptr"`
	Cplx  complex128      `json:"-"`
	Ch    chan int        `json:"-"`
	Iface error           `json:"iface"`
}

type rvDashes struct {
	A int `json:"a_b"`
	B int `json:"a-b"`
}

type rvExactFirst struct {
	Lower int `json:"name"`
	Upper int `json:"Name"`
}

type rvNeg0 struct {
	F float64
	G float32
	P *float64
	A any
	S float64 `json:",string"`
}

func rvDiff[T any](data string) func(t *testing.T) {
	return func(t *testing.T) {
		var want, got T
		wantErr := json.Unmarshal([]byte(data), &want)
		var gotErr error
		require.NotPanics(t, func() { gotErr = codec.JSON{}.Unmarshal([]byte(data), &got) })
		if wantErr != nil {
			require.Error(t, gotErr, "encoding/json refuses %s into %T (%v); codec.JSON decodes %#v", data, want, wantErr, got)
			return
		}
		require.NoError(t, gotErr, "encoding/json decodes %s into %T as %#v", data, want, want)
		require.True(t, reflect.DeepEqual(want, got), "decoding %s into %T:\nencoding/json: %#v\ncodec.JSON:    %#v", data, want, want, got)
	}
}

func TestReviewS2DecodeCorners(t *testing.T) {
	cases := map[string]func(*testing.T){
		// v2 methods
		"from/value":  rvDiff[rvMisc](`{"from":{"V":"x"}}`),
		"from/ptr":    rvDiff[rvMisc](`{"pfrom":{"V":"x"}}`),
		"from/top":    rvDiff[rvFrom](`{"V":"x"}`),
		"textval":     rvDiff[rvMisc](`{"tv":"x"}`),
		"textval/obj": rvDiff[rvMisc](`{"tv":{"N":1}}`),
		// json.Number
		"num/str":        rvDiff[rvNums](`{"n":"12"}`),
		"num/bad":        rvDiff[rvNums](`{"n":"x"}`),
		"num/empty":      rvDiff[rvNums](`{"n":""}`),
		"num/null":       rvDiff[rvNums](`{"n":null,"pn":null}`),
		"num/ptr":        rvDiff[rvNums](`{"pn":1.5e3}`),
		"num/list":       rvDiff[rvNums](`{"l":[1,"2",null],"m":{"a":-0}}`),
		"num/key":        rvDiff[rvNums](`{"k":{"12":1}}`),
		"num/key-nonnum": rvDiff[rvNums](`{"k":{"abc":1}}`),
		"num/key-empty":  rvDiff[rvNums](`{"k":{"":1}}`),
		"num/named":      rvDiff[rvNums](`{"rn":12}`),
		"num/named-str":  rvDiff[rvNums](`{"rn":"12"}`),
		"num/top":        rvDiff[json.Number](`12`),
		"num/topstr":     rvDiff[json.Number](`"1e5"`),
		// ,string
		"str/n-quoted":   rvDiff[rvStrings](`{"n":"12"}`),
		"str/n-dquoted":  rvDiff[rvStrings](`{"n":"\"12\""}`),
		"str/n-bare":     rvDiff[rvStrings](`{"n":12}`),
		"str/n-null":     rvDiff[rvStrings](`{"n":null}`),
		"str/n-qnull":    rvDiff[rvStrings](`{"n":"null"}`),
		"str/pn-quoted":  rvDiff[rvStrings](`{"pn":"12"}`),
		"str/pn-dquoted": rvDiff[rvStrings](`{"pn":"\"12\""}`),
		"str/pn-qnull":   rvDiff[rvStrings](`{"pn":"null"}`),
		"str/pi":         rvDiff[rvStrings](`{"pi":"12"}`),
		"str/pi-qnull":   rvDiff[rvStrings](`{"pi":"null"}`),
		"str/ppi":        rvDiff[rvStrings](`{"ppi":"12"}`),
		"str/i-qnull":    rvDiff[rvStrings](`{"i":"null"}`),
		"str/i-space":    rvDiff[rvStrings](`{"i":" 12"}`),
		"str/i-exp":      rvDiff[rvStrings](`{"i":"1e2"}`),
		"str/i-neg0":     rvDiff[rvStrings](`{"i":"-0"}`),
		"str/i-esc":      rvDiff[rvStrings](`{"i":"\u0031"}`),
		"str/b":          rvDiff[rvStrings](`{"b":"true"}`),
		"str/b-bare":     rvDiff[rvStrings](`{"b":true}`),
		"str/b-qq":       rvDiff[rvStrings](`{"b":"\"true\""}`),
		"str/s-plain":    rvDiff[rvStrings](`{"s":"x"}`),
		"str/s-quoted":   rvDiff[rvStrings](`{"s":"\"x\""}`),
		"str/s-qnull":    rvDiff[rvStrings](`{"s":"null"}`),
		"str/s-num":      rvDiff[rvStrings](`{"s":"12"}`),
		"str/f":          rvDiff[rvStrings](`{"f":"1e39"}`),
		"str/u8":         rvDiff[rvStrings](`{"u8":"256"}`),
		"str/any":        rvDiff[rvStrings](`{"a":"12"}`),
		"str/sl":         rvDiff[rvStrings](`{"sl":[1,2]}`),
		"str/sl-str":     rvDiff[rvStrings](`{"sl":"[1,2]"}`),
		"str/m":          rvDiff[rvStrings](`{"m":{"a":1}}`),
		"str/t":          rvDiff[rvStrings](`{"t":"2026-01-02T03:04:05Z"}`),
		"str/d":          rvDiff[rvStrings](`{"d":"12"}`),
		"str/d-bare":     rvDiff[rvStrings](`{"d":12}`),
		// maps
		"map/int-plus":  rvDiff[rvMaps](`{"i":{"+1":1}}`),
		"map/int-lead0": rvDiff[rvMaps](`{"i":{"01":1}}`),
		"map/int-neg0":  rvDiff[rvMaps](`{"i":{"-0":1}}`),
		"map/int-exp":   rvDiff[rvMaps](`{"i":{"1e2":1}}`),
		"map/int-space": rvDiff[rvMaps](`{"i":{" 1":1}}`),
		"map/int-under": rvDiff[rvMaps](`{"i":{"1_0":1}}`),
		"map/int8-over": rvDiff[rvMaps](`{"i8":{"200":1}}`),
		"map/uint-neg":  rvDiff[rvMaps](`{"u":{"-1":1}}`),
		"map/uint-plus": rvDiff[rvMaps](`{"u":{"+1":1}}`),
		"map/u64-max":   rvDiff[rvMaps](`{"u64":{"18446744073709551615":1}}`),
		"map/named-str": rvDiff[rvMaps](`{"s":{"x":1}}`),
		"map/keyjson":   rvDiff[rvMaps](`{"kj":{"x":1}}`),
		"map/keytext":   rvDiff[rvMaps](`{"kt":{"abc":1}}`),
		"map/float":     rvDiff[rvMaps](`{"f":{"1.5":1}}`),
		"map/bool":      rvDiff[rvMaps](`{"b":{"true":1}}`),
		"map/raw":       rvDiff[rvMaps](`{"r":{"a": [ 1 , 2 ] ,"b":"\u0041","c" : { "x" : null } }}`),
		"map/dup":       rvDiff[rvMaps](`{"ms":{"a":{"Name":"x"},"a":{}}}`),
		"map/dupmerge":  rvDiff[rvMaps](`{"i":{"1":1},"i":{"2":2}}`),
		// embedding
		"embed/ptr-unexp":      rvDiff[rvEmbedPtrUnexported](`{"X":1,"Z":2}`),
		"embed/ptr-unexp-z":    rvDiff[rvEmbedPtrUnexported](`{"Z":2}`),
		"embed/ptr-unexp-null": rvDiff[rvEmbedPtrUnexported](`{"X":null}`),
		"embed/ptr-exp":        rvDiff[rvEmbedPtrExported](`{"Y":1,"Z":2}`),
		"embed/conflict":       rvDiff[rvConflict](`{"Name":"x"}`),
		"embed/tagdom":         rvDiff[rvTagDominance](`{"name":"x","Name":"y"}`),
		"embed/tagdom2":        rvDiff[rvTagDominance](`{"NAME":"x"}`),
		// tags
		"tags/names":      rvDiff[rvTags](`{"a'b":1,"a\\b":2,"😀":3,"αβγ":4,"a b":5,",":6,"-":7,"Empty":8,"%x":9,"a\tb":10,"k":11,"S":12}`),
		"tags/fieldnames": rvDiff[rvTags](`{"Quote":1,"Slash":2,"Emoji":3,"Greek":4,"Space":5,"Comma":6,"Dash":7,"Pct":9,"Ctrl":10,"Kelvin":11,"Long":12}`),
		"tags/fold":       rvDiff[rvTags](`{"ΑΒΓ":4,"K":11,"s":12,"\u212a":11}`),
		// bytes
		"bytes/newline":     rvDiff[rvMisc](`{"bytes":"AQ\nID"}`),
		"bytes/cr":          rvDiff[rvMisc](`{"bytes":"AQ\r\nID"}`),
		"bytes/nopad":       rvDiff[rvMisc](`{"bytes":"AQI"}`),
		"bytes/url":         rvDiff[rvMisc](`{"bytes":"_-8="}`),
		"bytes/array":       rvDiff[rvMisc](`{"bytes":[1,2,300]}`),
		"bytes/arrayok":     rvDiff[rvMisc](`{"bytes":[1,2]}`),
		"bytes/named":       rvDiff[rvMisc](`{"rb":"AQID"}`),
		"bytes/plainbyte":   rvDiff[rvMisc](`{"pb":"AQID"}`),
		"bytes/textbyte":    rvDiff[rvMisc](`{"tb":"AQID"}`),
		"bytes/textbytearr": rvDiff[rvMisc](`{"tb":["a","bb"]}`),
		"bytes/arr-str":     rvDiff[rvMisc](`{"arr":"AQID"}`),
		"bytes/arr-long":    rvDiff[rvMisc](`{"arr":[1,2,3,4,5]}`),
		"bytes/arr-short":   rvDiff[rvMisc](`{"fix":[9,9],"fix":[1]}`),
		"bytes/null":        rvDiff[rvMisc](`{"bytes":null,"rb":null}`),
		"bytes/empty":       rvDiff[rvMisc](`{"bytes":""}`),
		// time
		"time/escaped":  rvDiff[rvMisc](`{"at":"2026-01-02T03:04:05\u005a"}`),
		"time/lower":    rvDiff[rvMisc](`{"at":"2026-01-02t03:04:05z"}`),
		"time/comma":    rvDiff[rvMisc](`{"at":"2026-01-02T03:04:05,5Z"}`),
		"time/hour24":   rvDiff[rvMisc](`{"at":"2026-01-02T24:00:00Z"}`),
		"time/offset":   rvDiff[rvMisc](`{"at":"2026-01-02T03:04:05+24:00"}`),
		"time/dot":      rvDiff[rvMisc](`{"at":"2026-01-02T03:04:05.Z"}`),
		"time/space":    rvDiff[rvMisc](`{"at":" 2026-01-02T03:04:05Z"}`),
		"time/null":     rvDiff[rvMisc](`{"at":null,"pat":null}`),
		"time/num":      rvDiff[rvMisc](`{"at":12}`),
		"time/yr5":      rvDiff[rvMisc](`{"at":"12026-01-02T03:04:05Z"}`),
		"time/ptr":      rvDiff[rvMisc](`{"pat":"2026-01-02T03:04:05.000000001+01:00"}`),
		"time/frac10":   rvDiff[rvMisc](`{"at":"2026-01-02T03:04:05.1234567891Z"}`),
		"time/top-null": rvDiff[time.Time](`null`),
		"dur/num":       rvDiff[rvMisc](`{"dur":1500}`),
		"dur/str":       rvDiff[rvMisc](`{"dur":"1s"}`),
		"dur/frac":      rvDiff[rvMisc](`{"dur":1.5}`),
		"big/num":       rvDiff[rvMisc](`{"big":123456789012345678901234567890}`),
		"big/str":       rvDiff[rvMisc](`{"big":"12"}`),
		"big/null":      rvDiff[rvMisc](`{"big":null}`),
		"bigv/num":      rvDiff[rvMisc](`{"bigv":-5}`),
		"big/exp":       rvDiff[rvMisc](`{"big":1e3}`),
		// raw
		"raw/ws":      rvDiff[rvMisc](`{"raw": [ 1 ,  2 ] }`),
		"raw/esc":     rvDiff[rvMisc](`{"raw":"\u0041\/"}`),
		"raw/null":    rvDiff[rvMisc](`{"raw":null}`),
		"raw/badutf8": rvDiff[rvMisc]("{\"raw\":\"\xff\"}"),
		"raw/top":     rvDiff[json.RawMessage](" { \"a\" : 1 } "),
		// dup merge
		"dup/slice":   rvDiff[rvMisc](`{"sl":[1,2,3],"sl":[4]}`),
		"dup/map":     rvDiff[rvMisc](`{"map":{"a":1},"map":{"b":2}}`),
		"dup/ptr":     rvDiff[rvMisc](`{"ptr":{"Name":"a"},"ptr":{}}`),
		"dup/ptrnull": rvDiff[rvMisc](`{"ptr":{"Name":"a"},"ptr":null}`),
		"dup/any":     rvDiff[rvMisc](`{"any":{"a":1},"any":{"b":2}}`),
		"dup/anyarr":  rvDiff[rvMisc](`{"any":[1],"any":{"b":2}}`),
		"dup/big":     rvDiff[rvMisc](`{"big":1,"big":2}`),
		"dup/raw":     rvDiff[rvMisc](`{"raw":[1,2,3],"raw":4}`),
		"dup/bytes":   rvDiff[rvMisc](`{"bytes":"AQID","bytes":"AQ=="}`),
		// numbers
		"num/f32over":      rvDiff[rvMisc](`{"f32":3.5e38}`),
		"num/f32under":     rvDiff[rvMisc](`{"f32":1e-50}`),
		"num/i8over":       rvDiff[rvMisc](`{"i8":128}`),
		"num/i8frac":       rvDiff[rvMisc](`{"i8":1.0}`),
		"num/i8exp":        rvDiff[rvMisc](`{"i8":1e1}`),
		"num/u64neg":       rvDiff[rvMisc](`{"u64":-0}`),
		"num/uptr":         rvDiff[rvMisc](`{"uptr":5}`),
		"num/iface":        rvDiff[rvMisc](`{"iface":null}`),
		"num/iface-obj":    rvDiff[rvMisc](`{"iface":{}}`),
		"num/iface-str":    rvDiff[rvMisc](`{"iface":"x"}`),
		"num/cplx":         rvDiff[complex128](`1`),
		"num/chan":         rvDiff[chan int](`1`),
		"num/chan-null":    rvDiff[chan int](`null`),
		"num/func":         rvDiff[func()](`null`),
		"num/any-1e400":    rvDiff[any](`1e400`),
		"num/anyarr-1e400": rvDiff[[]any](`[1,1e400,2]`),
		// utf8
		"utf8/key":      rvDiff[map[string]int]("{\"\xff\":1,\"\ufffd\":2}"),
		"utf8/keyfield": rvDiff[RVShallow]("{\"Nam\xff\":\"x\"}"),
		"utf8/surr":     rvDiff[string](`"\ud800\udc00\ud800"`),
		"utf8/surr2":    rvDiff[string](`"\udc00\ud800x"`),
		"utf8/nul":      rvDiff[string](`"\u0000"`),
		"utf8/ctrl":     rvDiff[string]("\"\x01\""),
		"utf8/del":      rvDiff[string]("\"\x7f\""),
		// syntax
		"syn/trailing":      rvDiff[int](`1 2`),
		"syn/trailingws":    rvDiff[int]("1 \t\r\n"),
		"syn/empty":         rvDiff[int](``),
		"syn/bom":           rvDiff[int]("\ufeff1"),
		"syn/nbsp":          rvDiff[int]("\u00a01"),
		"syn/nullstruct":    rvDiff[RVShallow](`null`),
		"syn/nullin":        rvDiff[rvMisc](`{"f32":null,"i8":null,"arr":null,"fix":null,"from":null,"tv":null,"bigv":null,"dur":null}`),
		"syn/typeerr-then":  rvDiff[rvMisc](`{"i8":"x","f32":1}`),
		"syn/typeerr-bad":   rvDiff[rvMisc](`{"i8":"x","f32":1`),
		"names/dash":        rvDiff[rvDashes](`{"a_b":1,"a-b":2}`),
		"names/nodash":      rvDiff[rvDashes](`{"ab":1,"AB":2}`),
		"names/fold":        rvDiff[rvDashes](`{"A_B":1,"a-B":2}`),
		"names/dupfold":     rvDiff[rvDashes](`{"A_B":1,"a_b":2,"A_b":3}`),
		"names/exactfirst":  rvDiff[rvExactFirst](`{"NAME":1}`),
		"names/exactfirst2": rvDiff[rvExactFirst](`{"name":1,"Name":2}`),
		"neg0/f64":          rvDiff[rvNeg0](`{"F":-0,"G":-0.0,"P":-0,"A":-0,"S":"-0"}`),
	}
	for name, c := range cases {
		t.Run(name, c)
	}
}

var _ = errors.New
var _ = strings.Repeat
