// Package plainjson writes and reads JSON strings that need no escaping,
// as encoding/json writes and reads them, without encoding/json: the
// codec's plain codec and the stores' metadata columns take this way for
// the strings most values hold, and hand anything else to encoding/json.
// Between two round trips to a database the processor's caches are cold,
// and fetching encoding/json's code and tables again took more time than
// the work itself.
package plainjson

import "unicode/utf8"

// AppendString appends s quoted, as encoding/json writes it, and reports
// whether it could: s is valid UTF-8 with no control character, quote,
// backslash, HTML special (<, >, &) or line or paragraph separator, the
// characters encoding/json escapes. Otherwise b is returned as it was.
func AppendString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return b, false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return b, false
		}
		i += size
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// String reads the string at data[i:], and returns it and where it ends,
// when it holds no escape and no control character and is valid UTF-8:
// then encoding/json reads its bytes as they are. Otherwise ok is false.
func String(data []byte, i int) (s string, end int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return "", i, false
	}
	end = i + 1
	for end < len(data) {
		switch c := data[end]; {
		case c == '"':
			return string(data[i+1 : end]), end + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		case c < utf8.RuneSelf:
			end++
		default:
			r, size := utf8.DecodeRune(data[end:])
			if r == utf8.RuneError && size == 1 {
				return "", i, false
			}
			end += size
		}
	}
	return "", i, false
}
