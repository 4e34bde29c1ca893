//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// The JSON serializer decodes with encoding/json's rules on encoding/json/v2
// (see codec.JSON). These tests hold it to decoding exactly what
// encoding/json decodes, on every kind of value a registered type can hold:
// the same value where encoding/json decodes one, an error where it fails.
// The fuzz target: go test -run='^$' -fuzz='^FuzzJSONDecodesLikeEncodingJSON$' ./codec/

// Folds has field names that differ only in case, a name encoding/json
// folds with its own rules (the Kelvin sign folds to k, the long s to s),
// a field dropped by "-", a field named "-", and string-tagged scalars.
type Folds struct {
	Kind    string  `json:"kind"`
	KIND    string  // collides with Kind case-insensitively: the tag wins
	Sign    string  `json:"ſign"`
	Kelvin  int     `json:"Kelvin"`
	Dropped string  `json:"-"`
	Dash    string  `json:"-,"`
	Flag    bool    `json:"flag,string"`
	Ratio   float64 `json:"ratio,string"`
	Text    string  `json:"text,string"`
	Small   float32 `json:"small"`
	Byte    uint8   `json:"byte"`
	Bytes   [4]byte `json:"bytes"`
	Empty   struct{}
	Inner   *Folds `json:"inner,omitempty"`
}

// Shapes has the loosely typed kinds: interfaces, numbers kept as text,
// raw messages, maps with non-string keys, and embedded structs, one by
// pointer, whose fields are promoted.
type Shapes struct {
	*Promoted
	Anything any                  `json:"anything"`
	List     []any                `json:"list"`
	Object   map[string]any       `json:"object"`
	Number   json.Number          `json:"number"`
	Raw      json.RawMessage      `json:"raw"`
	ByUint   map[uint16]bool      `json:"by_uint"`
	ByText   map[Code]int         `json:"by_text"`
	Custom   Custom               `json:"custom"`
	Code     Code                 `json:"code"`
	CodePtr  *Code                `json:"code_ptr"`
	When     map[string]time.Time `json:"when"`
	Matrix   [][2]int8            `json:"matrix"`
}

// Promoted is embedded in Shapes by pointer.
type Promoted struct {
	Level int    `json:"level"`
	Note  string `json:"note"`
}

// Code decodes from a JSON string through encoding.TextUnmarshaler, and
// refuses one that does not start with "c-".
type Code string

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Code) UnmarshalText(b []byte) error {
	if !strings.HasPrefix(string(b), "c-") {
		return errors.New("code: no c- prefix")
	}
	*c = Code(b)
	return nil
}

// Custom decodes itself from any JSON value, keeping its length.
type Custom struct{ Len int }

// UnmarshalJSON implements json.Unmarshaler.
func (c *Custom) UnmarshalJSON(b []byte) error {
	if string(b) == `"refuse"` {
		return errors.New("custom: refused")
	}
	c.Len = len(b)
	return nil
}

// decodeEveryTarget decodes data into every kind of target.
func decodeEveryTarget(t *testing.T, data []byte) {
	t.Helper()
	decodesLikeEncodingJSON[Kitchen](t, data)
	decodesLikeEncodingJSON[Folds](t, data)
	decodesLikeEncodingJSON[Shapes](t, data)
	decodesLikeEncodingJSON[any](t, data)
	decodesLikeEncodingJSON[[]int](t, data)
	decodesLikeEncodingJSON[string](t, data)
	decodesLikeEncodingJSON[map[string]float64](t, data)
}

// jsonGen writes random JSON documents, mostly valid, with the names the
// targets' fields have (in other cases too) and the values that stress a
// decoder: big, negative, fractional and exponent numbers, escapes,
// surrogates, invalid UTF-8, and the wrong kind of value for a field.
type jsonGen struct {
	r *rand.Rand
	b strings.Builder
}

var genNames = []string{
	"id", "at", "due", "name", "flag", "count", "small", "unsigned", "ratio", "big_string", "huge",
	"decimal", "home", "work", "previous", "tags", "fixed", "scores", "by_number", "nested", "maybe",
	"blob", "raw", "extra", "by", "street", "lines", "kind", "KIND", "Kind", "ſign", "sign", "SIGN",
	"Kelvin", "kelvin", "\u212aelvin", "Dropped", "-", "text", "byte", "bytes", "Empty", "inner",
	"anything", "list", "object", "number", "by_uint", "by_text", "custom", "code", "code_ptr", "when",
	"matrix", "quoted", "numbers", "num_ptr", "level", "note", "Level", "NOTE", "Promoted", "", "x\u00e9", "Count", "COUNT",
}

var genNumbers = []string{
	"0", "-0", "1", "-1", "7", "255", "256", "-129", "65535", "65536", "1.5", "-2.25", "1e3", "1E+2",
	"2.5e-3", "9007199254740993", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
	"-9223372036854775809", "1e400", "3.4e39", "0.1", "123456789012345678901234567890", "01", "1.", ".5", "+1", "-",
}

var genStrings = []string{
	`""`, `"a"`, `"c-1"`, `"refuse"`, `"12"`, `"-3.5"`, `"true"`, `"null"`, `"\"7\""`, `"\u00e9"`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`, "\"\xff\xfe\"", `"a\nb"`, `"\/"`, `"2026-01-02T03:04:05Z"`,
	`"2026-01-02T03:04:05.123456789+01:00"`, `"2026-01-02T03:04:05\u005a"`, `"not a time"`, `"AQID"`, `"AQI="`, `"!!"`, `"c-\u0000"`,
	`"\u212a"`, `"ſ"`, "\"\u2028\"", `"1e3"`, `" 1"`,
}

func (g *jsonGen) doc() []byte {
	g.b.Reset()
	g.value(0)
	s := g.b.String()
	if g.r.IntN(8) == 0 && len(s) > 0 { // damage it: a byte dropped, changed, or added
		const damage = `{}[]",:0an\\`
		i, c := g.r.IntN(len(s)), string(damage[g.r.IntN(len(damage))])
		switch g.r.IntN(3) {
		case 0:
			s = s[:i] + s[i+1:]
		case 1:
			s = s[:i] + c + s[i+1:]
		default:
			s = s[:i] + c + s[i:]
		}
	}
	return []byte(s)
}

func (g *jsonGen) value(depth int) {
	n := 10
	if depth > 3 {
		n = 5 // scalars only
	}
	switch g.r.IntN(n) {
	case 0:
		g.b.WriteString("null")
	case 1:
		g.b.WriteString([]string{"true", "false"}[g.r.IntN(2)])
	case 2, 3:
		g.b.WriteString(genNumbers[g.r.IntN(len(genNumbers))])
	case 4:
		g.b.WriteString(genStrings[g.r.IntN(len(genStrings))])
	case 5, 6:
		g.b.WriteByte('[')
		for i := range g.r.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.b.WriteByte(']')
	default:
		g.b.WriteByte('{')
		for i := range g.r.IntN(6) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			if g.r.IntN(10) == 0 {
				g.b.WriteString(genStrings[g.r.IntN(len(genStrings))]) // a key that is a number, a time, ...
			} else {
				g.b.WriteString(strconv.Quote(genNames[g.r.IntN(len(genNames))]))
			}
			g.b.WriteByte(':')
			g.value(depth + 1)
		}
		g.b.WriteByte('}')
	}
}

// TestJSONDecodesLikeEncodingJSON decodes random documents into every kind
// of target with both decoders (fixed seeds: a failure repeats).
func TestJSONDecodesLikeEncodingJSON(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	docs := 20000
	if testing.Short() {
		docs = 2000
	}
	g := jsonGen{r: rand.New(rand.NewPCG(28, 6))}
	for range docs {
		decodeEveryTarget(t, g.doc())
	}
}

// TestJSONDecodesEncodedValuesLikeEncodingJSON decodes what encoding/json
// encodes, the path every stored event takes.
func TestJSONDecodesEncodedValuesLikeEncodingJSON(t *testing.T) {
	due := time.Date(2026, 12, 6, 12, 0, 0, 5, time.FixedZone("x", 3600))
	code := Code("c-9")
	values := []any{
		Kitchen{Name: "ada", Due: &due, Tags: []string{}, Scores: map[string]int{"a": 1}, Raw: json.RawMessage(`{"a":[1,2]}`), Blob: []byte{0, 255}},
		Folds{Kind: "k", KIND: "K", Sign: "s", Kelvin: 3, Dash: "d", Flag: true, Ratio: 0.1, Text: `"q"`, Small: 1.5, Bytes: [4]byte{1, 2, 3, 4}, Inner: &Folds{Kind: "in"}},
		Shapes{Promoted: &Promoted{Level: 2}, Anything: map[string]any{"n": 1.5, "l": []any{"x", nil, true}}, Number: "12.50",
			ByUint: map[uint16]bool{7: true}, ByText: map[Code]int{"c-a": 1}, Code: "c-b", CodePtr: &code,
			When: map[string]time.Time{"t": due}, Matrix: [][2]int8{{1, -1}, {127, -128}}},
	}
	for _, v := range values {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		t.Run(fmt.Sprintf("%T", v), func(t *testing.T) { decodeEveryTarget(t, data) })
	}
}

func FuzzJSONDecodesLikeEncodingJSON(f *testing.F) {
	g := jsonGen{r: rand.New(rand.NewPCG(6, 12))}
	for range 64 {
		f.Add(g.doc())
	}
	f.Fuzz(decodeEveryTarget)
}

// TestJSONRefusesWhatEncodingJSONRefusesToDecodeInto: a nil or a
// non-pointer destination is encoding/json's InvalidUnmarshalError, not a
// panic.
func TestJSONRefusesWhatEncodingJSONRefusesToDecodeInto(t *testing.T) {
	for _, v := range []any{nil, Folds{}, 7, (*Folds)(nil)} {
		err := codec.JSON{}.Unmarshal([]byte(`{"kind":"k"}`), v)
		var invalid *json.InvalidUnmarshalError
		require.ErrorAs(t, err, &invalid, "%T", v)
	}
}

// Timed holds a time.Time in one of the places a type can hold one.
type (
	timeField   struct{ At time.Time }
	timePointer struct{ At *time.Time }
	timeNested  struct{ Inner timeField }
	timeEmbeds  struct{ timePointer }
	timeList    struct {
		Name string
		At   []*[1]time.Time
	}
	timeChain struct {
		At   *time.Time
		Next *timeChain
	}
)

// TestJSONDecodesATimeWhereverATypeHoldsIt: a type that can hold a
// time.Time at any depth decodes it as encoding/json does (through its
// UnmarshalJSON, refusing a time with escapes that v2 alone would accept);
// the serializer leaves that rule out only for types that cannot hold one.
func TestJSONDecodesATimeWhereverATypeHoldsIt(t *testing.T) {
	for _, at := range []string{`"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05\u005a"`, `"2026-01-02T03:04:05.5+01:00"`, `"x"`, `7`, `null`} {
		t.Run(at, func(t *testing.T) {
			decodesLikeEncodingJSON[time.Time](t, []byte(at))
			decodesLikeEncodingJSON[*time.Time](t, []byte(at))
			decodesLikeEncodingJSON[timeField](t, []byte(`{"At":`+at+`}`))
			decodesLikeEncodingJSON[timePointer](t, []byte(`{"At":`+at+`}`))
			decodesLikeEncodingJSON[timeNested](t, []byte(`{"Inner":{"At":`+at+`}}`))
			decodesLikeEncodingJSON[timeEmbeds](t, []byte(`{"At":`+at+`}`))
			decodesLikeEncodingJSON[timeList](t, []byte(`{"Name":"n","At":[[`+at+`],null]}`))
			decodesLikeEncodingJSON[timeChain](t, []byte(`{"Next":{"Next":{"At":`+at+`}}}`))
			decodesLikeEncodingJSON[[]time.Time](t, []byte(`[`+at+`]`))
			decodesLikeEncodingJSON[map[string]time.Time](t, []byte(`{"k":`+at+`}`))
			decodesLikeEncodingJSON[map[string][2]*time.Time](t, []byte(`{"k":[null,`+at+`]}`))

			// Decoding into a value that already holds a pointer to a
			// time.Time behind an interface fills that time.
			var want, got struct{ X any }
			want.X, got.X = new(time.Time), new(time.Time)
			data := []byte(`{"X":` + at + `}`)
			wantErr := json.Unmarshal(data, &want)
			gotErr := codec.JSON{}.Unmarshal(data, &got)
			require.Equal(t, wantErr == nil, gotErr == nil, "decoding %s into a held *time.Time: encoding/json says %v, the serializer %v", data, wantErr, gotErr)
			if wantErr == nil {
				require.Equal(t, want, got)
			}
		})
	}
}

// Lenient is what encoding/json decodes by its lenient rules, where v2's
// error reporting refuses: a `string` option on kinds it does not apply
// to, a func field given null, two promoted fields of one name (encoding/json
// drops both), and names that match two fields case-insensitively.
type Lenient struct {
	lenientA
	lenientB
	List  []int           `json:"list,string"`
	Inner struct{ N int } `json:"inner,string"`
	Any   any             `json:"any,string"`
	Func  func()          `json:"func"`
	Kind  string          `json:"kind"`
	KIND  string
}

type (
	lenientA struct{ Dup, OnlyA int }
	lenientB struct{ Dup, OnlyB int }
)

// TestJSONDecodesWhatOnlyEncodingJSONsRulesAccept: a registered type
// decodes first by stricter rules, then by encoding/json's where those
// refuse; what only encoding/json's accept decodes as encoding/json does.
func TestJSONDecodesWhatOnlyEncodingJSONsRulesAccept(t *testing.T) {
	for _, doc := range []string{
		`{"list":[1,2],"inner":{"N":3},"any":"x","func":null,"Kind":"k","Dup":4,"OnlyA":5,"OnlyB":6}`,
		`{"list":[1],"KInd":"k"}`,
		`{"func":null}`,
		`{"Dup":1}`,
		`{"any":{"a":[1,"b"]}}`,
		`{"func":7}`,
		`{"list":"[1]"}`,
		`{"kind":1,"KIND":"x"}`,
		`{"list":[1],"KInd":"k"`,
	} {
		decodesLikeEncodingJSON[Lenient](t, []byte(doc))
	}
}
