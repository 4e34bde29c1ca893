package storekit_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/eventstore/storekit"
)

// randomExtraString draws from what encoding/json writes as it is and
// what it escapes, replaces or refuses to take as written.
func randomExtraString(r *rand.Rand) string {
	alphabet := []string{"a", "Z", "0", ".", " ", "~", "\x7f", "é", "日本", "🙂", "<", ">", "&", `"`, `\`, "\n", "\t", "\x00",
		"\u2028", "\u2029", "\xff", "\xe2\x82", "cairn.command_type", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	var b strings.Builder
	for range r.IntN(6) {
		if r.IntN(2) == 0 {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func TestExtraJSONWritesWhatEncodingJSONWrites(t *testing.T) {
	assert.Nil(t, storekit.ExtraJSON(nil))
	assert.Nil(t, storekit.ExtraJSON(map[string]string{}))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		extra := map[string]string{}
		for range 1 + r.IntN(6) {
			extra[randomExtraString(r)] = randomExtraString(r)
		}
		want, err := json.Marshal(extra)
		require.NoError(t, err)
		require.Equal(t, string(want), string(storekit.ExtraJSON(extra)), "%q", extra)
	}
}

// requireReadsLikeEncodingJSON requires DecodeExtraJSON to read data as
// encoding/json reads it into a map[string]string.
func requireReadsLikeEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]string
	wantErr := json.Unmarshal(data, &want)
	got, err := storekit.DecodeExtraJSON(data)
	if wantErr != nil {
		require.Error(t, err, "%q: encoding/json refuses it (%v)", data, wantErr)
		return
	}
	require.NoError(t, err, "%q", data)
	require.Equal(t, want, got, "%q", data)
}

func TestDecodeExtraJSONReadsAsEncodingJSONReads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		extra := map[string]string{}
		for range r.IntN(5) {
			extra[randomExtraString(r)] = randomExtraString(r)
		}
		data, err := json.Marshal(extra)
		require.NoError(t, err)
		requireReadsLikeEncodingJSON(t, data)
		// Near misses: cut short, trailed, padded, a key named twice,
		// values of other kinds, nested.
		doc := string(data)
		for _, near := range []string{doc[:r.IntN(len(doc)+1)], doc + "x", " " + doc, doc + " ", `{"a":"1","a":"2"}`,
			`{"a":1}`, `{"a":null}`, `{"a":"b",}`, `{"a" :"b"}`, `{"a":"b"}{}`, `null`, `[]`, `{"a":{"b":"c"}}`, `{}`, `{"":""}`} {
			requireReadsLikeEncodingJSON(t, []byte(near))
		}
	}
}

func FuzzDecodeExtraJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"cairn.command_type":"account.deposit"}`, `{"a":"b","c":"d"}`, `{"a":"\u00e9"}`, "{\"a\":\"\xff\"}", `{"a":"1","a":"2"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(requireReadsLikeEncodingJSON)
}
