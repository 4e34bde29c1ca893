package plainjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/plainjson"
)

// FuzzStringsAsEncodingJSON holds both functions to encoding/json: what
// AppendString writes, encoding/json writes; what String reads, encoding/json
// reads into the same string; and each takes every string that needs no
// escaping.
func FuzzStringsAsEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "a", "é", "🙂", "<", "&", `"`, `\`, "\n", "\x7f", "\u2028", "\xff", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		plain := !strings.ContainsAny(s, "<>&\"\\\u2028\u2029") && strings.ToValidUTF8(s, "") == s &&
			strings.IndexFunc(s, func(r rune) bool { return r < 0x20 }) < 0
		got, ok := plainjson.AppendString([]byte("x"), s)
		require.Equal(t, plain, ok, "%q", s)
		if ok {
			require.Equal(t, "x"+string(want), string(got))
		} else {
			require.Equal(t, "x", string(got))
		}
		// Reading: s quoted as it is (valid JSON or not), and as
		// encoding/json writes it.
		for _, doc := range []string{`"` + s + `"`, string(want)} {
			read, end, ok := plainjson.String([]byte(doc+","), 0)
			if !ok {
				require.False(t, plain && doc == string(want), "String refuses what encoding/json writes for plain %q", s)
				continue
			}
			var back string
			require.NoError(t, json.Unmarshal([]byte(doc[:end]), &back), "String reads %q", doc[:end])
			require.Equal(t, back, read)
		}
	})
}
