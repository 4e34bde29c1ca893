// Package checked has what a partial view of a JSON document decodes in
// place of a value it must check but need not keep. Such a view refuses
// exactly the documents that a decoding of the whole refuses, at a
// fraction of the cost: saga scans read step records this way, whose
// payloads (base64 text, often most of a record's bytes) they never use.
package checked

import "encoding/json"

// Bytes decodes from what encoding/json decodes into a []byte, and refuses
// the rest, keeping nothing: null, base64 text (standard alphabet, padded;
// line breaks ignored) or an array of bytes. Plain base64 text, the form
// encoding/json writes, is checked without allocating; anything else is
// decided by encoding/json itself.
//
// Its decoding keeps nothing of its input, changes none of it, touches
// nothing but its (empty) value and never panics: the codec counts it
// among the pure decoders, which it may call twice, or on a document whose
// syntax it has not checked yet.
type Bytes struct{}

// UnmarshalJSON implements [json.Unmarshaler].
func (*Bytes) UnmarshalJSON(data []byte) error {
	if plain(data) {
		return nil
	}
	var b []byte
	return json.Unmarshal(data, &b)
}

// plain reports whether data is null, or a JSON string that needs no
// unescaping and holds base64 text that encoding/json's decoder
// (base64.StdEncoding, which is not strict about the bits the last
// character leaves over) accepts: whole groups of four characters of the
// alphabet, the last group ending in at most two padding characters. It
// may report false for text that is valid all the same (line breaks, or
// escaped characters): encoding/json decides those.
func plain(data []byte) bool {
	if string(data) == "null" {
		return true
	}
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return false
	}
	s := data[1 : len(data)-1]
	if len(s)%4 != 0 {
		return false
	}
	n := len(s)
	for i := 0; i < 2 && n > 0 && s[n-1] == '='; i++ {
		n--
	}
	return inAlphabet(s[:n])
}

// inAlphabet reports whether every byte of s is in the standard base64
// alphabet. It looks at eight bytes a round without branching on them:
// payloads run to hundreds of kilobytes, and this check is most of what
// reading one costs.
func inAlphabet(s []byte) bool {
	var out byte
	for len(s) >= 8 {
		out |= outside[s[0]] | outside[s[1]] | outside[s[2]] | outside[s[3]] |
			outside[s[4]] | outside[s[5]] | outside[s[6]] | outside[s[7]]
		s = s[8:]
	}
	for _, c := range s {
		out |= outside[c]
	}
	return out == 0
}

// outside is 1 for the bytes outside the standard base64 alphabet.
var outside = func() (a [256]byte) {
	for i := range a {
		a[i] = 1
	}
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		a[c] = 0
	}
	return a
}()
