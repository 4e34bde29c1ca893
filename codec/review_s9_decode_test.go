//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// Review (S9) of f8ad91b (a type that cannot hold a time.Time decodes
// without the time.Time unmarshaler) and a6a71a4 (a registered type decodes
// first with v2's error reporting, then again with encoding/json's where
// that refuses): differential tests of Registry.DecodeCurrent and
// codec.JSON{}.Unmarshal against encoding/json.Unmarshal.

// s9Equal is reflect.DeepEqual with floats compared bit for bit (so -0 and
// +0 differ), at any depth.
func s9Equal(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Struct:
		for i := range a.NumField() {
			if !s9Equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Array:
		for i := range a.Len() {
			if !s9Equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !s9Equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return s9Equal(a.Elem(), b.Elem())
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !s9Equal(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return a.Pointer() == b.Pointer()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Complex64, reflect.Complex128:
		return a.Complex() == b.Complex()
	}
	panic("s9Equal: " + a.Kind().String())
}

var (
	s9Mu         sync.Mutex
	s9Registries = map[reflect.Type]*codec.Registry{}
)

// s9Registry returns a registry that has T registered as "s9.t" v1.
func s9Registry[T any](t testing.TB) *codec.Registry {
	t.Helper()
	s9Mu.Lock()
	defer s9Mu.Unlock()
	typ := reflect.TypeFor[T]()
	reg, ok := s9Registries[typ]
	if !ok {
		reg = codec.NewRegistry(codec.Options{})
		require.NoError(t, codec.Register[T](reg, "s9.t", 1))
		require.NoError(t, reg.Validate())
		s9Registries[typ] = reg
	}
	return reg
}

// s9Outcomes decodes data into a fresh T with encoding/json, with
// codec.JSON{}.Unmarshal and through a registry, and describes every way
// the latter two differ from the first ("" if none). before runs before
// each decoding (to reset state a stateful method keeps).
func s9Outcomes[T any](t testing.TB, data []byte, before func()) string {
	t.Helper()
	if before == nil {
		before = func() {}
	}
	reg := s9Registry[T](t)
	var want T
	before()
	wantErr := json.Unmarshal(append([]byte(nil), data...), &want)

	var diffs string
	var got T
	before()
	gotErr := codec.JSON{}.Unmarshal(append([]byte(nil), data...), &got)
	diffs += s9Compare("codec.JSON{}.Unmarshal", data, want, wantErr, got, gotErr)

	before()
	decoded, _, regErr := reg.DecodeCurrent(&eventstore.Event{EventData: eventstore.EventData{Type: "s9.t", SchemaVersion: 1, Data: append([]byte(nil), data...)}})
	var regVal T
	if regErr == nil {
		regVal = decoded.(T)
	}
	diffs += s9Compare("Registry.DecodeCurrent", data, want, wantErr, regVal, regErr)
	return diffs
}

func s9Compare[T any](who string, data []byte, want T, wantErr error, got T, gotErr error) string {
	switch {
	case wantErr != nil && gotErr == nil:
		return fmt.Sprintf("%s: %q into %T: encoding/json refuses (%v), codec decodes %#v\n", who, data, want, wantErr, got)
	case wantErr == nil && gotErr != nil:
		return fmt.Sprintf("%s: %q into %T: encoding/json decodes %#v, codec refuses (%v)\n", who, data, want, want, gotErr)
	case wantErr == nil && !s9Equal(reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem()):
		return fmt.Sprintf("%s: %q into %T: encoding/json decodes %#v, codec %#v\n", who, data, want, want, got)
	}
	return ""
}

// s9Same requires that decoding data into a fresh T has one outcome.
func s9Same[T any](t *testing.T, data string) {
	t.Helper()
	if d := s9Outcomes[T](t, []byte(data), nil); d != "" {
		t.Error(d)
	}
}

// ---------------------------------------------------------------------------
// Counterexamples (they fail on a6a71a4 / HEAD, pass on 581b21f and f8ad91b,
// except the map key ones, which fail on all three).
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
	got, _, err := s9Registry[s9SeqDoc](t).DecodeCurrent(&eventstore.Event{EventData: eventstore.EventData{Type: "s9.t", SchemaVersion: 1, Data: []byte(data)}})
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
	s9Same[s9B64Doc](t, `{"p":"aGVsbG8gd29ybGQ=","f":null}`)
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
	reg := s9Registry[s9CentsDoc](t)
	for _, data := range []string{`{"seq":0,"c":"x"`, `{"seq":0,"c":"x"}x`, `{"seq":0,"c":"x",}`} {
		var v s9CentsDoc
		s9Calls = 0
		wantErr := json.Unmarshal([]byte(data), &v)
		require.Error(t, wantErr)
		require.Equal(t, 0, s9Calls, "encoding/json runs no method on %s", data)
		s9Calls = 0
		_, _, err := reg.DecodeCurrent(&eventstore.Event{EventData: eventstore.EventData{Type: "s9.t", SchemaVersion: 1, Data: []byte(data)}})
		require.ErrorIs(t, err, codec.ErrUndecodable)
		assert.Equal(t, 0, s9Calls, "UnmarshalJSON calls through the registry on %s", data)
	}
	_, _, err := reg.DecodeCurrent(&eventstore.Event{EventData: eventstore.EventData{Type: "s9.t", SchemaVersion: 1, Data: []byte(`{"c":1,`)}})
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
	s9Same[map[s9Both]int](t, `{"a":1}`)
	s9Same[map[s9EmbTime]int](t, `{"2026-01-02T03:04:05\u005a":1}`) // encoding/json refuses the escaped time
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
		s9Same[map[time.Time]int](t, `{`+key+`:1}`)
		s9Same[s9Gen[map[time.Time]int]](t, `{"V":{`+key+`:1},"F":null}`)
		s9Same[s9Gen[time.Time]](t, `{"V":`+at+`}`)
		s9Same[s9Gen[time.Time]](t, `{"V":`+at+`,"F":null}`)
		s9Same[s9Gen[*[1]time.Time]](t, `{"V":[`+at+`],"F":null}`)
		s9Same[s9TimeS](t, `{"at":`+at+`,"pat":`+at+`}`)
		s9Same[s9TimeS](t, `{"at":`+at+`,"pat":`+at+`,"f":null}`)
		s9Same[s9Rec](t, `{"Next":{"Next":{"At":`+at+`}},"F":null}`)
		s9Same[s9Rec](t, `{"Next":{"Next":{"At":`+at+`}}}`)
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
			if d := s9Outcomes[s9Mix](t, []byte(doc), nil) + s9Outcomes[s9MixTimed](t, []byte(doc), nil); d != "" {
				t.Error(d)
			}
		}
	}
}

// TestReviewS9DeepNesting: around the 10,000 depth limit, the strict pass
// (which does not check the syntax first) agrees with encoding/json.
func TestReviewS9DeepNesting(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		arr := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		s9Same[s9Deep](t, arr)
		s9Same[s9DeepObj](t, strings.Repeat(`{"n":`, depth-1)+`{"f":null}`+strings.Repeat("}", depth-1))
		s9Same[s9DeepObj](t, strings.Repeat(`{"n":`, depth-1)+`{}`+strings.Repeat("}", depth-1))
	}
}

type s9Deep []s9Deep

type s9DeepObj struct {
	N *s9DeepObj `json:"n"`
	F func()     `json:"f"`
}

// s9NonZero requires codec.JSON{}.Unmarshal into mk() to decode as
// encoding/json into another mk().
func s9NonZero[T any](t *testing.T, mk func() T, data string) {
	t.Helper()
	want, got := mk(), mk()
	wantErr := json.Unmarshal([]byte(data), &want)
	gotErr := codec.JSON{}.Unmarshal([]byte(data), &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Errorf("%s into %T: encoding/json %v, codec %v", data, want, wantErr, gotErr)
		return
	}
	if wantErr == nil && !s9Equal(reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem()) {
		t.Errorf("%s into %T:\nencoding/json %#v\ncodec         %#v", data, want, want, got)
	}
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
		s9NonZero(t, mk, d)
	}
	for _, d := range []string{`{"X":1}`, `{"X":1,"Z":2}`, `{"Z":2}`, `null`, `{"X":null}`} {
		s9NonZero(t, func() s9Outer { return s9Outer{s9inner: &s9inner{X: 3, Y: 4}, Z: 5} }, d)
		s9NonZero(t, func() s9Outer { return s9Outer{} }, d)
	}
	for _, d := range []string{`1`, `null`, `"x"`, `{"A":1}`, `[1]`, `true`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05\u005a"`} {
		s9NonZero(t, func() any { return 7 }, d)
		s9NonZero(t, func() any { i := 7; return &i }, d)
		s9NonZero(t, func() any { i := 7; p := &i; return &p }, d)
		s9NonZero(t, func() any { return &s9El{A: 1} }, d)
		s9NonZero(t, func() any { return map[string]any{"a": 1} }, d)
		s9NonZero(t, func() any { return []any{1} }, d)
		s9NonZero(t, func() any { var p *int; return p }, d)
		s9NonZero(t, func() any { var p *s9El; return p }, d)
		s9NonZero(t, func() any { return new(any) }, d)
		s9NonZero(t, func() any { tm := time.Unix(1, 0); return &tm }, d)
		s9NonZero(t, func() any { tm := time.Unix(1, 0); p := &tm; return &p }, d)
		s9NonZero(t, func() *any { var a any = 3; return &a }, d)
		s9NonZero(t, func() **int { i := 3; p := &i; return &p }, d)
		s9NonZero(t, func() []int { return []int{1, 2} }, d)
		s9NonZero(t, func() map[string]any { return map[string]any{"A": 9} }, d)
		s9NonZero(t, func() json.RawMessage { return json.RawMessage("1") }, d)
		s9NonZero(t, func() [2]int { return [2]int{1, 2} }, d)
		s9NonZero(t, func() *Code { c := Code("c-0"); return &c }, d)
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
		s9Outcomes[s9Mix](t, data, nil),
		s9Outcomes[s9MixTimed](t, data, nil),
		s9Outcomes[[]s9Mix](t, data, nil),
		s9Outcomes[map[string]s9MixTimed](t, data, nil),
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
