//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-es/cairn/internal/testrig/race"
)

// Review (S9), continued: every refusal of the strict first pass, and
// random documents and a fuzz target over them, into types that hold every
// shape it refuses (see review_s9_decode_test.go).

// TestReviewS9EveryStrictRefusal decodes, through the registry, a document
// for every place v2 reads ReportErrorsWithLegacySemantics while
// unmarshaling: the `string` option on []byte, maps, structs, slices,
// arrays, **T, interfaces, time.Time and time.Duration; struct field
// conflicts (errInit); ambiguous folded names; a nil embedded pointer to an
// unexported struct (errNilField); null and values into func, chan and
// complex; failing UnmarshalText, UnmarshalJSON and time unmarshalers; and
// the whole-input syntax check. Each alone, and after and before other
// fields.
func TestReviewS9EveryStrictRefusal(t *testing.T) {
	members := []string{
		`"bytes":"AQID"`, `"bytes":"\"AQID\""`, `"bytes":null`, `"m":{"a":1}`, `"m":"{}"`, `"inner":{"N":1}`, `"list":[1]`, `"list":"[1]"`,
		`"arrs":[1,2,3]`, `"arrs":"[1]"`, `"pp":1`, `"pp":"1"`, `"pp":null`, `"pi":"1"`, `"pi":1`, `"anys":"x"`, `"anys":{"a":1}`, `"anys":1`,
		`"ats":"2026-01-02T03:04:05Z"`, `"ats":"\"2026-01-02T03:04:05Z\""`, `"dur":"1"`, `"dur":1`, `"dur":"1s"`,
		`"Dup":1`, `"dup":1`, `"Kind":"k"`, `"KIND":"k"`, `"kind":"k"`, `"kInD":1`, `"X":1`, `"Y":null`, `"OnlyA":2`,
		`"func":null`, `"func":1`, `"ch":null`, `"ch":[]`, `"cplx":null`, `"cplx":1`,
		`"code":"x"`, `"code":"c-1"`, `"code":1`, `"custom":"refuse"`, `"custom":[1]`, `"at":"x"`, `"at":"2026-01-02T03:04:05\u005a"`,
		`"tk":{"x":1}`, `"kt":{"1":1}`, `"ki":{"300":"a"}`, `"u8":256`, `"i":"1"`, `"i":1`, `"b":"true"`, `"s":"\"x\""`, `"s":"x"`,
		`"next":{"func":null,"kind":"k"}`, `"l":[{"list":[1]},{"i":"2"}]`,
	}
	for _, m := range members {
		for _, doc := range []string{`{` + m + `}`, `{"i":"5",` + m + `,"s":"\"y\""}`, `{` + m + `,"fl":1.5}`, `{` + m + `,}`, `{` + m} {
			if d := decodeOutcomes[s9Mix](t, []byte(doc), nil) + decodeOutcomes[s9MixTimed](t, []byte(doc), nil); d != "" {
				t.Error(d)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Random documents and a fuzz target over the strict pass's refusals.
// ---------------------------------------------------------------------------

// s9Mix holds every shape a6a71a4's strict pass refuses and encoding/json
// accepts (a `string` option where it does not apply, null into a func,
// chan or complex, fields that conflict, names that fold to two fields,
// an embedded pointer to an unexported struct) beside plain fields and
// types with pure decoding methods. No value of it can hold a time.Time
// (f8ad91b's timeless decoding).
type s9Mix struct {
	s9EmbA
	s9EmbB
	*s9inner
	Kind   string            `json:"kind"`
	KIND   string            // folds with kind
	Kinde  string            `json:"KINDE"`
	List   []int             `json:"list,string"`
	Bytes  []byte            `json:"bytes,string"`
	Inner  struct{ N int }   `json:"inner,string"`
	M      map[string]int    `json:"m,string"`
	PP     **int             `json:"pp,string"`
	PI     *int              `json:"pi,string"`
	Func   func()            `json:"func"`
	Ch     chan int          `json:"ch"`
	Cplx   complex128        `json:"cplx"`
	I      int               `json:"i,string"`
	F      float64           `json:"f,string"`
	B      bool              `json:"b,string"`
	S      string            `json:"s,string"`
	U8     uint8             `json:"u8"`
	Fl     float32           `json:"fl"`
	Code   Code              `json:"code"`
	Custom Custom            `json:"custom"`
	KT     map[rvKeyText]int `json:"kt"`
	KI     map[int8]string   `json:"ki"`
	Arr    [2]int            `json:"arr"`
	ArrS   [2]int            `json:"arrs,string"`
	Raw    json.RawMessage   `json:"raw"`
	Next   *s9Mix            `json:"next"`
	L      []s9Mix           `json:"l"`
}

type (
	s9EmbA struct{ Dup, OnlyA int }
	s9EmbB struct{ Dup, OnlyB int }
)

// s9MixTimed is s9Mix with a time.Time and interfaces (the decoding with
// the time.Time unmarshaler), the `string` option on them too.
type s9MixTimed struct {
	s9Mix
	At    time.Time         `json:"at"`
	AtS   time.Time         `json:"ats,string"`
	PAt   *time.Time        `json:"pat"`
	Any   any               `json:"any"`
	AnyS  any               `json:"anys,string"`
	TK    map[time.Time]int `json:"tk"`
	Dur   time.Duration     `json:"dur,string"`
	Next2 *s9MixTimed       `json:"next2"`
}

var s9Names = []string{"Dup", "dup", "OnlyA", "OnlyB", "X", "Y", "x", "kind", "Kind", "KIND", "KINDE", "kinde", "list", "bytes",
	"inner", "m", "pp", "pi", "func", "ch", "cplx", "i", "f", "b", "s", "S", "u8", "fl", "code", "custom", "kt", "ki",
	"arr", "arrs", "raw", "next", "l", "at", "ats", "pat", "any", "anys", "tk", "dur", "next2", "N", "zz", "Kınd", "\u212aind"}

var s9Values = []string{`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `1e2`, `300`, `-129`, `1e400`, `18446744073709551616`,
	`"1"`, `"-0"`, `"\"1\""`, `"true"`, `"null"`, `"x"`, `""`, `"AQID"`, `"c-1"`, `"refuse"`, `"1.5"`, `" 1"`, `"01"`,
	`"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05\u005a"`, `"1s"`, `"[1]"`, `"{}"`, `[]`, `[1,2]`, `[1,2,3]`, `["1"]`,
	`[null]`, `{}`, `{"N":1}`, `{"1":"a"}`, `{"-1":"a"}`, `{"200":"a"}`, `{"a":1}`, `{"2026-01-02T03:04:05Z":1}`, `"\ud800"`, "\"\xff\""}

// s9Doc writes a random document of s9Names and s9Values.
func s9Doc(r *rand.Rand, depth int) string {
	return randomDoc{names: s9Names, values: s9Values, maxDepth: 3, leafOdds: 4, arrayOdds: 5, members: 6, quote: strconv.Quote}.write(r, depth)
}

func s9DecodeAll(t *testing.T, data []byte) {
	t.Helper()
	for _, d := range []string{
		decodeOutcomes[s9Mix](t, data, nil),
		decodeOutcomes[s9MixTimed](t, data, nil),
		decodeOutcomes[[]s9Mix](t, data, nil),
		decodeOutcomes[map[string]s9MixTimed](t, data, nil),
	} {
		if d != "" {
			t.Fatal(d)
		}
	}
}

// TestReviewS9MixedDocs decodes random documents, many of which a6a71a4's
// strict pass refuses, into s9Mix and s9MixTimed (fixed seed).
func TestReviewS9MixedDocs(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(9, 9))
	for range n {
		s9DecodeAll(t, []byte(s9Doc(r, 0)))
	}
}

func FuzzReviewS9Mixed(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		f.Add([]byte(s9Doc(r, 0)))
	}
	f.Fuzz(s9DecodeAll)
}
