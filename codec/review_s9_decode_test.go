//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
)

// Review (S9) of f8ad91b (a type that cannot hold a time.Time decodes
// without the time.Time unmarshaler) and a6a71a4 (a registered type decodes
// first with v2's error reporting, then again with encoding/json's where
// that refuses): differential tests of Registry.DecodeCurrent and
// codec.JSON{}.Unmarshal against encoding/json.Unmarshal (decodeOutcomes,
// differential_test.go).

// ---------------------------------------------------------------------------
// Counterexamples (they failed at a6a71a4, which 6aa2dc7 mended; the map
// key ones failed before either commit too).
// ---------------------------------------------------------------------------

// s9Calls counts the calls of s9Seq.UnmarshalJSON.
var s9Calls int

// s9Seq numbers the values it decodes (a method with a side effect: a
// counter, an interning table, a metric).
type s9Seq int

func (s *s9Seq) UnmarshalJSON([]byte) error { s9Calls++; *s = s9Seq(s9Calls); return nil }

// s9SeqDoc has a method-decoded field before one that a6a71a4's strict
// pass refuses (the `string` option on a slice, which encoding/json
// ignores).
type s9SeqDoc struct {
	Seq  s9Seq    `json:"seq"`
	Tags []string `json:"tags,string"`
}

// TestReviewS9CounterexampleMethodRunsTwice: where the strict pass refuses
// the document after a method ran, the legacy pass runs it again, so a
// method with a side effect sees two calls where encoding/json makes one.
// At fault: a6a71a4.
func TestReviewS9CounterexampleMethodRunsTwice(t *testing.T) {
	data := `{"seq":0,"tags":["a"]}`
	var want s9SeqDoc
	s9Calls = 0
	require.NoError(t, json.Unmarshal([]byte(data), &want))
	require.Equal(t, s9SeqDoc{Seq: 1, Tags: []string{"a"}}, want)
	require.Equal(t, 1, s9Calls)

	s9Calls = 0
	got, err := decodeRegistered(registryOf[s9SeqDoc](t), []byte(data))
	require.NoError(t, err)
	require.Equal(t, 1, s9Calls, "UnmarshalJSON calls through the registry")
	require.Equal(t, want, got)
}

// s9B64 decodes base64 in place, in the bytes it is given (which
// encoding/json allows: it reads no input twice).
type s9B64 []byte

func (p *s9B64) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' {
		return errors.New("s9B64: not a string")
	}
	n, err := base64.StdEncoding.Decode(b[1:], b[1:len(b)-1])
	if err != nil {
		return err
	}
	*p = append(s9B64(nil), b[1:1+n]...)
	return nil
}

type s9B64Doc struct {
	P    s9B64  `json:"p"`
	Func func() `json:"f"` // null into a func: the strict pass refuses
}

// TestReviewS9CounterexampleMethodChangesTheInput: the method's in-place
// work on the first (strict) pass is what the second pass reads, so a
// document encoding/json decodes fails. At fault: a6a71a4.
func TestReviewS9CounterexampleMethodChangesTheInput(t *testing.T) {
	decodesLikeEncodingJSON[s9B64Doc](t, []byte(`{"p":"aGVsbG8gd29ybGQ=","f":null}`))
}

// s9Cents slices its input as a quoted string, and panics on a number.
type s9Cents string

func (c *s9Cents) UnmarshalJSON(b []byte) error { *c = s9Cents(b[1 : len(b)-1]); return nil }

type s9CentsDoc struct {
	C   s9Cents `json:"c"`
	Seq s9Seq   `json:"seq"`
}

// TestReviewS9CounterexampleMethodRunsOnBrokenSyntax: encoding/json checks
// the whole document before decoding, so no method runs on a broken one;
// the strict pass runs the methods it meets first, and a panic there
// replaces encoding/json's syntax error with the registry's "serializer
// panicked". At fault: a6a71a4 (both are errors, so the outcome class is
// the same; the calls and the error are not).
func TestReviewS9CounterexampleMethodRunsOnBrokenSyntax(t *testing.T) {
	reg := registryOf[s9CentsDoc](t)
	for _, data := range []string{`{"seq":0,"c":"x"`, `{"seq":0,"c":"x"}x`, `{"seq":0,"c":"x",}`} {
		var v s9CentsDoc
		s9Calls = 0
		wantErr := json.Unmarshal([]byte(data), &v)
		require.Error(t, wantErr)
		require.Equal(t, 0, s9Calls, "encoding/json runs no method on %s", data)
		s9Calls = 0
		_, err := decodeRegistered(reg, []byte(data))
		require.ErrorIs(t, err, codec.ErrUndecodable)
		assert.Equal(t, 0, s9Calls, "UnmarshalJSON calls through the registry on %s", data)
	}
	_, err := decodeRegistered(reg, []byte(`{"c":1,`))
	require.ErrorIs(t, err, codec.ErrUndecodable)
	require.NotContains(t, err.Error(), "panicked", "encoding/json says: %v", json.Unmarshal([]byte(`{"c":1,`), new(s9CentsDoc)))
}

// s9Both is a map key type with both methods: encoding/json decodes a key
// with UnmarshalJSON, given the quoted key as it is (decode.go's
// literalStore), v2's v1 rules with UnmarshalText.
type s9Both string

func (k *s9Both) UnmarshalText(b []byte) error { *k = s9Both("text:" + string(b)); return nil }
func (k *s9Both) UnmarshalJSON(b []byte) error { *k = s9Both("json:" + string(b)); return nil }

// s9EmbTime has time.Time's two methods, promoted.
type s9EmbTime struct{ time.Time }

// TestReviewS9CounterexampleMapKeyWithBothMethods: decodesOnV2 keeps such
// a map on v2, which decodes its keys otherwise. Not from either commit
// (581b21f has it), in codec.JSON{}.Unmarshal and the registry alike.
func TestReviewS9CounterexampleMapKeyWithBothMethods(t *testing.T) {
	decodesLikeEncodingJSON[map[s9Both]int](t, []byte(`{"a":1}`))
	decodesLikeEncodingJSON[map[s9EmbTime]int](t, []byte(`{"2026-01-02T03:04:05\u005a":1}`)) // encoding/json refuses the escaped time
}

// ---------------------------------------------------------------------------
// Regression tests that pass: what was tried and found to agree.
// ---------------------------------------------------------------------------

// TestReviewS9TimeKeysAndTimesEverywhere: time.Time as a map key (which
// encoding/json decodes with UnmarshalJSON, given the quoted key, as the
// codec's time unmarshaler does), `string`-tagged times, and times in
// generic and recursive types, through the registry.
func TestReviewS9TimeKeysAndTimesEverywhere(t *testing.T) {
	for _, at := range []string{`"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05\u005a"`, `"2026-01-02T03:04:05.5+01:00"`, `"x"`, `""`, `7`, `null`, `"\"2026-01-02T03:04:05Z\""`} {
		key := at
		if !strings.HasPrefix(key, `"`) {
			key = strconv.Quote(key)
		}
		decodesLikeEncodingJSON[map[time.Time]int](t, []byte(`{`+key+`:1}`))
		decodesLikeEncodingJSON[s9Gen[map[time.Time]int]](t, []byte(`{"V":{`+key+`:1},"F":null}`))
		decodesLikeEncodingJSON[s9Gen[time.Time]](t, []byte(`{"V":`+at+`}`))
		decodesLikeEncodingJSON[s9Gen[time.Time]](t, []byte(`{"V":`+at+`,"F":null}`))
		decodesLikeEncodingJSON[s9Gen[*[1]time.Time]](t, []byte(`{"V":[`+at+`],"F":null}`))
		decodesLikeEncodingJSON[s9TimeS](t, []byte(`{"at":`+at+`,"pat":`+at+`}`))
		decodesLikeEncodingJSON[s9TimeS](t, []byte(`{"at":`+at+`,"pat":`+at+`,"f":null}`))
		decodesLikeEncodingJSON[s9Rec](t, []byte(`{"Next":{"Next":{"At":`+at+`}},"F":null}`))
		decodesLikeEncodingJSON[s9Rec](t, []byte(`{"Next":{"Next":{"At":`+at+`}}}`))
	}
}

// s9Gen is a generic type with a field the strict pass refuses null into.
type s9Gen[T any] struct {
	V T
	F func()
}

type s9TimeS struct {
	At  time.Time  `json:"at,string"`
	PAt *time.Time `json:"pat,string"`
	F   func()     `json:"f"`
}

type s9Rec struct {
	At   *time.Time
	Next *s9Rec
	F    chan int
}

// TestReviewS9DeepNesting: around the 10,000 depth limit, the strict pass
// (which does not check the syntax first) agrees with encoding/json.
func TestReviewS9DeepNesting(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		arr := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		decodesLikeEncodingJSON[s9Deep](t, []byte(arr))
		decodesLikeEncodingJSON[s9DeepObj](t, []byte(strings.Repeat(`{"n":`, depth-1)+`{"f":null}`+strings.Repeat("}", depth-1)))
		decodesLikeEncodingJSON[s9DeepObj](t, []byte(strings.Repeat(`{"n":`, depth-1)+`{}`+strings.Repeat("}", depth-1)))
	}
}

type s9Deep []s9Deep

type s9DeepObj struct {
	N *s9DeepObj `json:"n"`
	F func()     `json:"f"`
}

type s9El struct {
	A, B int
	P    *int
	M    map[string]int
	S    []int
}

type s9inner struct{ X, Y int }

type s9Outer struct {
	*s9inner
	Z int
}

type s9Holder struct {
	I  any
	P  *s9El
	PP **int
	L  []s9El
	Ar [2]s9El
	M  map[string]s9El
	MP map[string]*s9El
	R  json.RawMessage
	By []byte
	T  time.Time
	PT *time.Time
	F  float64
	TK map[time.Time]int
}

// TestReviewS9NonZeroTargets: codec.JSON{}.Unmarshal merges into values
// that already hold pointers, slices with spare capacity, maps, arrays,
// interfaces holding pointers, times and embedded pointers to unexported
// structs as encoding/json does.
func TestReviewS9NonZeroTargets(t *testing.T) {
	mkEl := func() s9El { o := 7; return s9El{A: 1, B: 2, P: &o, M: map[string]int{"k": 1}, S: []int{1, 2, 3}} }
	mk := func() s9Holder {
		i := 5
		pi := &i
		el := mkEl()
		tm := time.Unix(100, 0).UTC()
		s := make([]s9El, 1, 3)
		s[0] = mkEl()
		s2 := s[:3]
		s2[1], s2[2] = mkEl(), mkEl()
		return s9Holder{I: &el, P: &el, PP: &pi, L: s, Ar: [2]s9El{mkEl(), mkEl()}, M: map[string]s9El{"a": mkEl()},
			MP: map[string]*s9El{"a": &el}, R: json.RawMessage(`[1]`), By: []byte{1, 2}, T: tm, PT: &tm, F: -1, TK: map[time.Time]int{tm: 1}}
	}
	for _, d := range []string{`{}`, `null`, `{"I":{"A":9}}`, `{"I":null}`, `{"I":5}`, `{"I":[1]}`, `{"P":{"A":9}}`, `{"P":null}`, `{"PP":3}`, `{"PP":null}`,
		`{"L":[{"A":9}]}`, `{"L":[{"A":9},{"B":8}]}`, `{"L":[{},{},{}]}`, `{"L":[{},{},{},{}]}`, `{"L":[]}`, `{"L":null}`,
		`{"Ar":[{"A":9}]}`, `{"Ar":[]}`, `{"Ar":[{},{},{}]}`, `{"Ar":null}`,
		`{"M":{"a":{"B":9}}}`, `{"M":{"b":{"B":9}}}`, `{"M":null}`, `{"M":{}}`, `{"MP":{"a":{"B":9}}}`, `{"MP":{"a":null}}`,
		`{"R":null}`, `{"R":{"x":1}}`, `{"By":null}`, `{"By":"AQ=="}`, `{"T":null}`, `{"PT":null}`, `{"PT":"2026-01-02T03:04:05Z"}`,
		`{"T":"2026-01-02T03:04:05\u005a"}`, `{"PT":"2026-01-02T03:04:05\u005a"}`, `{"F":-0}`, `{"F":null}`,
		`{"TK":{"2026-01-02T03:04:05Z":2}}`, `{"TK":{"2026-01-02T03:04:05\u005a":2}}`, `{"TK":null}`,
		`{"P":{"P":null,"M":{"z":1},"S":[9]}}`, `{"P":{"S":null,"M":null}}`, `{"I":{"P":1}}`,
		`{"L":[{"S":[5]},{"S":[]}]}`, `{"I":"x"}`, `{"P":5}`, `{"L":[1]}`, `{"M":{"a":1}}`,
	} {
		decodesIntoLikeEncodingJSON(t, mk, d)
	}
	for _, d := range []string{`{"X":1}`, `{"X":1,"Z":2}`, `{"Z":2}`, `null`, `{"X":null}`} {
		decodesIntoLikeEncodingJSON(t, func() s9Outer { return s9Outer{s9inner: &s9inner{X: 3, Y: 4}, Z: 5} }, d)
		decodesIntoLikeEncodingJSON(t, func() s9Outer { return s9Outer{} }, d)
	}
	for _, d := range []string{`1`, `null`, `"x"`, `{"A":1}`, `[1]`, `true`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05\u005a"`} {
		decodesIntoLikeEncodingJSON(t, func() any { return 7 }, d)
		decodesIntoLikeEncodingJSON(t, func() any { i := 7; return &i }, d)
		decodesIntoLikeEncodingJSON(t, func() any { i := 7; p := &i; return &p }, d)
		decodesIntoLikeEncodingJSON(t, func() any { return &s9El{A: 1} }, d)
		decodesIntoLikeEncodingJSON(t, func() any { return map[string]any{"a": 1} }, d)
		decodesIntoLikeEncodingJSON(t, func() any { return []any{1} }, d)
		decodesIntoLikeEncodingJSON(t, func() any { var p *int; return p }, d)
		decodesIntoLikeEncodingJSON(t, func() any { var p *s9El; return p }, d)
		decodesIntoLikeEncodingJSON(t, func() any { return new(any) }, d)
		decodesIntoLikeEncodingJSON(t, func() any { tm := time.Unix(1, 0); return &tm }, d)
		decodesIntoLikeEncodingJSON(t, func() any { tm := time.Unix(1, 0); p := &tm; return &p }, d)
		decodesIntoLikeEncodingJSON(t, func() *any { var a any = 3; return &a }, d)
		decodesIntoLikeEncodingJSON(t, func() **int { i := 3; p := &i; return &p }, d)
		decodesIntoLikeEncodingJSON(t, func() []int { return []int{1, 2} }, d)
		decodesIntoLikeEncodingJSON(t, func() map[string]any { return map[string]any{"A": 9} }, d)
		decodesIntoLikeEncodingJSON(t, func() json.RawMessage { return json.RawMessage("1") }, d)
		decodesIntoLikeEncodingJSON(t, func() [2]int { return [2]int{1, 2} }, d)
		decodesIntoLikeEncodingJSON(t, func() *Code { c := Code("c-0"); return &c }, d)
	}
}
