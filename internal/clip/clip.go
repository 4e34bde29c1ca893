// Package clip quotes values for error messages without letting a huge
// input make a huge message.
package clip

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a value Quote shows.
const Max = 64

// Quote returns s quoted as %q does when it is at most [Max] bytes long;
// otherwise its first Max bytes (cut at a rune boundary) quoted, then "..."
// and its length, so that a 4 MB argument makes a message of a hundred
// bytes, which still says what the value began with and how long it was.
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	cut := Max
	for cut > Max-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
