package names

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The byte-wise fast paths answer as the rune-wise definitions do, for
// ASCII, control characters, NUL, multi-byte runes and invalid UTF-8 at
// every place in a string.
func TestFastPathsMatchTheDefinitions(t *testing.T) {
	pieces := []string{"a", "Z", "-", ".", " ", "~", "\x00", "\x01", "\x1f", "\x7f", "é", "€", "😀", "\u0085", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := Printable(s), utf8.ValidString(s) && !strings.ContainsFunc(s, IsControl); got != want {
			t.Fatalf("Printable(%q) = %v, want %v", s, got, want)
		}
		if got, want := StorableText(s), utf8.ValidString(s) && !strings.ContainsRune(s, 0); got != want {
			t.Fatalf("StorableText(%q) = %v, want %v", s, got, want)
		}
	}
}
