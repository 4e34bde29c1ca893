// Package names holds the naming rules and limits that package eventstore
// (a filter's check) and package eventstore/storekit (an append's, a
// consumer's) apply alike, so that the two cannot drift apart.
package names

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cairn-es/cairn/internal/clip"
)

const (
	// MaxStreamLen is the longest stream name, in bytes.
	MaxStreamLen = 512
	// MaxTypeLen is the longest event type name, in bytes.
	MaxTypeLen = 256
	// MaxFilterTypes is the most event types one filter may list.
	MaxFilterTypes = 1024
	// MaxFilterPrefixes is the most stream prefixes one filter may list.
	MaxFilterPrefixes = 1024
)

// StreamProblem says what is wrong with a stream name, or "".
func StreamProblem(stream string) string {
	switch {
	case stream == "":
		return "is empty"
	case len(stream) > MaxStreamLen:
		return fmt.Sprintf("is %d bytes long, more than the limit of %d", len(stream), MaxStreamLen)
	case !Printable(stream):
		return "is not printable UTF-8"
	case strings.HasPrefix(stream, "$"):
		return `starts with "$", which is reserved for system streams`
	}
	return ""
}

// TypeProblem says what is wrong with an event type name, or "" when
// nothing is: appends and filters apply the one rule.
func TypeProblem(typ string) string {
	switch {
	case typ == "":
		return "is empty"
	case len(typ) > MaxTypeLen:
		return fmt.Sprintf("is %d bytes long, more than the limit of %d", len(typ), MaxTypeLen)
	case !Printable(typ):
		return fmt.Sprintf("%s is not printable UTF-8", clip.Quote(typ))
	}
	return ""
}

// IsControl reports an ASCII control character, which no name may hold.
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f }

// StorableText reports whether s can be stored as text by every store:
// valid UTF-8 (SQLite's JSON, PostgreSQL's text and jsonb) and no NUL byte,
// which PostgreSQL's text cannot hold.
func StorableText(s string) bool {
	// As Printable does, a word at a time.
	i := asciiWords(s, ones, 0) // no NUL, nothing from 0x80
	for ; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && !strings.ContainsRune(s[i:], 0)
		}
	}
	return true
}

// Printable reports whether s is valid UTF-8 without control characters
// ([IsControl]). Names are nearly always printable ASCII, which one pass
// over the bytes settles without decoding runes; at the first other byte
// the rest is checked rune by rune.
func Printable(s string) bool {
	// Eight bytes at a time while every one is printable ASCII, which
	// halves the instructions: a save checks names four times (the
	// aggregate ID, the stream at the read and at the append, the event
	// type), and byte by byte that was a sixth of the instructions of
	// Cairn's own code in a save on the memory store. The loop below
	// settles what the words do not.
	i := asciiWords(s, 0x20*ones, ones) // 0x20 to 0x7e
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return utf8.ValidString(s[i:]) && !strings.ContainsFunc(s[i:], IsControl)
		}
	}
	return true
}

// asciiWords returns how many of the first bytes of s are settled by
// eight-byte words of which every byte b is at least low and less than
// 0x80-high (lowWord and highWord, those bytes repeated): len(s) when all
// are, the tail shorter than a word being read as the last eight bytes,
// which overlap the word before; else the start of the first word that
// fails, or of the tail of a string shorter than a word.
//
// A byte below low sets its high bit in (w - lowWord) &^ w, and one of
// 0x80-high or more in (w + highWord) | w; a borrow or a carry across
// bytes comes only from such a byte.
func asciiWords(s string, lowWord, highWord uint64) int {
	fails := func(w uint64) bool { return ((w-lowWord)&^w|(w+highWord)|w)&highs != 0 }
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if fails(word(s, i)) {
			return i
		}
	}
	if i < len(s) && len(s) >= 8 && !fails(word(s, len(s)-8)) {
		return len(s)
	}
	return i
}

// ones and highs are a word's bytes each 1, and each 0x80.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// word returns the eight bytes of s from i, the first the least
// significant, in one load.
func word(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
