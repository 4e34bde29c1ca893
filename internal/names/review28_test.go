package names

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Every string of up to two bytes, and every two bytes after an ASCII
// prefix of each length up to 3 and before an ASCII suffix: the fast
// paths agree with the definitions, and so do StreamProblem and
// TypeProblem with the rule they replaced.
func TestReview28ExhaustiveShortStrings(t *testing.T) {
	check := func(s string) {
		if got, want := Printable(s), utf8.ValidString(s) && !strings.ContainsFunc(s, IsControl); got != want {
			t.Fatalf("Printable(%q) = %v, want %v", s, got, want)
		}
		if got, want := StorableText(s), utf8.ValidString(s) && !strings.ContainsRune(s, 0); got != want {
			t.Fatalf("StorableText(%q) = %v, want %v", s, got, want)
		}
		bad := !utf8.ValidString(s) || strings.ContainsFunc(s, IsControl)
		if s != "" && !strings.HasPrefix(s, "$") {
			if got := StreamProblem(s) == "is not printable UTF-8"; got != bad {
				t.Fatalf("StreamProblem(%q) = %q", s, StreamProblem(s))
			}
		}
		if s != "" {
			if got := strings.HasSuffix(TypeProblem(s), "is not printable UTF-8"); got != bad {
				t.Fatalf("TypeProblem(%q) = %q", s, TypeProblem(s))
			}
		}
	}
	check("")
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			two := string([]byte{byte(a), byte(b)})
			for _, pre := range []string{"", "x", "xy", "xyz"} {
				check(pre + two)
				check(pre + two + "q")
				check(pre + two + "\x80")
			}
		}
	}
	for _, s := range []string{"\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\x80", "a\u2028", "\u0085"} {
		check(s)
		check("abc" + s)
		check(s + "\x00")
	}
}
