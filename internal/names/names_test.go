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

// The word-wise fast paths read eight bytes at a time: every byte value
// at every place of strings that span up to three words, after an ASCII
// prefix, and a second byte beside it across a word's border, answer as
// the definitions do.
func TestWordsMatchTheDefinitions(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := Printable(s), utf8.ValidString(s) && !strings.ContainsFunc(s, IsControl); got != want {
			t.Fatalf("Printable(%q) = %v, want %v", s, got, want)
		}
		if got, want := StorableText(s), utf8.ValidString(s) && !strings.ContainsRune(s, 0); got != want {
			t.Fatalf("StorableText(%q) = %v, want %v", s, got, want)
		}
	}
	const ascii = "account-0123456789abcdef~ Z"
	for n := range len(ascii) {
		check(ascii[:n])
		for at := range n {
			for c := range 256 {
				b := []byte(ascii[:n])
				b[at] = byte(c)
				check(string(b))
				if at+1 < n {
					b[at+1] = 0x80 // a continuation byte: valid after some leads
					check(string(b))
				}
			}
		}
	}
}

// Fuzzed strings, seeded with words that end in each kind of byte, answer
// as the definitions do.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "abcdefg", "abcdefgh", "abcdefghi", "abcdefg\x7f", "abcdefg\x1f",
		"abcdefg\xc3\xa9", "abcdef\xe2\x82\xac", "\xff\x00abcdef", "0123456789abcde\x80", "\x7e\x7e\x7e\x7e\x7e\x7e\x7e\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Printable(s), utf8.ValidString(s) && !strings.ContainsFunc(s, IsControl); got != want {
			t.Fatalf("Printable(%q) = %v, want %v", s, got, want)
		}
	})
}

func FuzzStorableText(f *testing.F) {
	for _, s := range []string{"", "abcdefg", "abcdefgh", "abcdefghi", "abcdefg\x00", "\x80\x00bcdefgh",
		"abcdefg\xc3\xa9", "abcdef\xe2\x82\xac", "\x01\x01\x01\x01\x01\x01\x01\x00", "0123456789abcde\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := StorableText(s), utf8.ValidString(s) && !strings.ContainsRune(s, 0); got != want {
			t.Fatalf("StorableText(%q) = %v, want %v", s, got, want)
		}
	})
}
