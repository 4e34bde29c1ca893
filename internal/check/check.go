// Package check holds the few assertions that Cairn's exported test kits
// (storetest, commandtest, projectiontest, sagatest, aggregatetest) need.
// The kits are imported by other modules' tests, so they report through
// [testing.TB] alone and pull no assertion library into those modules.
// Cairn's own tests use testify.
//
// Every check stops the test with t.Fatalf when it fails: a kit's case
// checks one behaviour, and what follows a broken step only adds noise. So
// they must be called from the test's goroutine, as t.FailNow must; other
// goroutines report with t.Errorf. what, when given, says what was checked:
// a format string and its arguments, or a single value.
package check

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// NoError stops the test when err is not nil.
func NoError(t testing.TB, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sunexpected error: %v\n\t(%T)", prefix(what), err, err)
	}
}

// Equal stops the test when got is not want (by [reflect.DeepEqual], and
// bytes by content), showing both and, for structs and slices, where they
// differ.
func Equal[T any](t testing.TB, got, want T, what ...any) {
	t.Helper()
	if d := Diff(got, want); d != "" {
		t.Fatal(prefix(what) + d)
	}
}

// Diff returns "" when got equals want as [Equal] compares them, and
// otherwise a message that shows both and where they differ.
func Diff(got, want any) string {
	if equal(got, want) {
		return ""
	}
	g, w := show(got), show(want)
	if g == w {
		g, w = fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", want)
	}
	msg := fmt.Sprintf("not equal\n\tgot:  %s\n\twant: %s", g, w)
	if d := diff(reflect.ValueOf(got), reflect.ValueOf(want)); d != "" {
		msg += "\n\tdiffer in " + d
	}
	return msg
}

// True stops the test when ok is false; what should say what was expected.
func True(t testing.TB, ok bool, what ...any) {
	t.Helper()
	if !ok {
		if len(what) == 0 {
			what = []any{"condition is false"}
		}
		t.Fatal(strings.TrimSuffix(prefix(what), ": "))
	}
}

// Less stops the test unless a < b.
func Less[T cmp.Ordered](t testing.TB, a, b T, what ...any) {
	t.Helper()
	if !(a < b) {
		t.Fatalf("%swant %v < %v", prefix(what), a, b)
	}
}

// AtMost stops the test unless a <= b.
func AtMost[T cmp.Ordered](t testing.TB, a, b T, what ...any) {
	t.Helper()
	if !(a <= b) {
		t.Fatalf("%swant %v <= %v", prefix(what), a, b)
	}
}

// ErrorIs stops the test unless errors.Is(err, target).
func ErrorIs(t testing.TB, err, target error, what ...any) {
	t.Helper()
	if err == nil && target != nil {
		t.Fatalf("%sgot no error, want one that matches %v", prefix(what), target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%sgot error %v\n\t(%T)\n\twant one that matches %v", prefix(what), err, err, target)
	}
}

// ErrorAs stops the test unless errors.As(err, target).
func ErrorAs(t testing.TB, err error, target any, what ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("%sgot no error, want one that is a %v", prefix(what), reflect.TypeOf(target).Elem())
	}
	if !errors.As(err, target) {
		t.Fatalf("%sgot error %v\n\t(%T)\n\twant one that is a %v", prefix(what), err, err, reflect.TypeOf(target).Elem())
	}
}

// Len stops the test unless list (a slice, map, string or channel) has n
// elements, and shows list when it has not.
func Len(t testing.TB, list any, n int, what ...any) {
	t.Helper()
	v := reflect.ValueOf(list)
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.String, reflect.Array, reflect.Chan:
	default:
		t.Fatalf("%scheck.Len of a %T", prefix(what), list)
	}
	if v.Len() != n {
		t.Fatalf("%shas %d elements, want %d: %s", prefix(what), v.Len(), n, show(list))
	}
}

// Contains stops the test unless s contains sub.
func Contains(t testing.TB, s, sub string, what ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s%q\n\tdoes not contain %q", prefix(what), s, sub)
	}
}

// Eventually stops the test unless cond returns true within wait, asking
// every tick.
func Eventually(t testing.TB, cond func() bool, wait, tick time.Duration, what ...any) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%snot true within %s", prefix(what), wait)
		}
		time.Sleep(tick)
	}
}

// prefix renders what as "text: ", or "" when there is none.
func prefix(what []any) string {
	if len(what) == 0 {
		return ""
	}
	if format, ok := what[0].(string); ok {
		return fmt.Sprintf(format, what[1:]...) + ": "
	}
	return fmt.Sprint(what...) + ": "
}

func equal(got, want any) bool {
	if g, ok := got.([]byte); ok {
		w, _ := want.([]byte)
		return string(g) == string(w) && (g == nil) == (w == nil)
	}
	return reflect.DeepEqual(got, want)
}

// show renders v as a test shows it: strings quoted, everything else with
// its field names (and String methods, such as positions').
func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []byte:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%+v", v)
}

// diff names the first place where got and want differ: the fields of a
// struct, the index of a slice, with both values there. It returns "" for
// other kinds.
func diff(got, want reflect.Value) string {
	for got.IsValid() && want.IsValid() && got.Kind() == reflect.Interface && want.Kind() == reflect.Interface && !got.IsNil() && !want.IsNil() {
		got, want = got.Elem(), want.Elem()
	}
	if !got.IsValid() || !want.IsValid() || got.Type() != want.Type() {
		return ""
	}
	switch got.Kind() {
	case reflect.Struct:
		var out []string
		for i := range got.NumField() {
			f := got.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			g, w := got.Field(i).Interface(), want.Field(i).Interface()
			if !equal(g, w) {
				out = append(out, fmt.Sprintf("%s (got %s, want %s)", f.Name, show(g), show(w)))
			}
		}
		return strings.Join(out, ", ")
	case reflect.Slice, reflect.Array:
		if got.Len() != want.Len() {
			return fmt.Sprintf("length (got %d, want %d)", got.Len(), want.Len())
		}
		for i := range got.Len() {
			g, w := got.Index(i), want.Index(i)
			if !equal(g.Interface(), w.Interface()) {
				d := fmt.Sprintf("[%d] (got %s, want %s)", i, show(g.Interface()), show(w.Interface()))
				if in := diff(g, w); in != "" {
					d = fmt.Sprintf("[%d]: %s", i, in)
				}
				return d
			}
		}
	}
	return ""
}

// Within stops the test unless got is within d of want: a time that went
// through a store, which may round it.
func Within(t testing.TB, got, want time.Time, d time.Duration, what ...any) {
	t.Helper()
	if diff := got.Sub(want); diff < -d || diff > d {
		t.Fatalf("%sgot time %s\n\twant %s, within %s (off by %s)", prefix(what), got, want, d, diff)
	}
}

// Run runs fn as the subtest name of t when t has subtests (a
// [*testing.T]), and otherwise as part of t itself, so that a kit's case
// with subtests also runs under a [testing.TB] that records failures (see
// [Record]). It reports whether fn passed.
func Run(t testing.TB, name string, fn func(t testing.TB)) bool {
	t.Helper()
	if tt, ok := t.(interface {
		Run(name string, fn func(t *testing.T)) bool
	}); ok {
		return tt.Run(name, func(t *testing.T) { fn(t) })
	}
	fn(t)
	return !t.Failed()
}
