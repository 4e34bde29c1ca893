package checked_test

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/internal/checked"
)

// refusesLikeBytes requires checked.Bytes to decode data, as a value and
// as a field, exactly when encoding/json decodes it into a []byte.
func refusesLikeBytes(t *testing.T, data string) {
	t.Helper()
	var want []byte
	wantErr := json.Unmarshal([]byte(data), &want)
	var got checked.Bytes
	gotErr := got.UnmarshalJSON([]byte(data))
	assert.Equal(t, wantErr == nil, gotErr == nil, "%q: encoding/json into a []byte: %v; checked.Bytes: %v", data, wantErr, gotErr)

	// As a field, where encoding/json calls the method with null too.
	doc := `{"d":` + data + `}`
	var wantField struct {
		D []byte `json:"d"`
	}
	var gotField struct {
		D checked.Bytes `json:"d"`
	}
	wantErr, gotErr = json.Unmarshal([]byte(doc), &wantField), json.Unmarshal([]byte(doc), &gotField)
	assert.Equal(t, wantErr == nil, gotErr == nil, "%q: encoding/json into a []byte field: %v; a checked.Bytes field: %v", doc, wantErr, gotErr)
}

// TestBytesRefusesWhatBytesRefuse holds checked.Bytes to encoding/json's
// []byte on the forms a payload can take, well formed or damaged.
func TestBytesRefusesWhatBytesRefuse(t *testing.T) {
	for _, data := range []string{
		`null`, `""`, `"QQ=="`, `"QUI="`, `"QUJD"`, `"QUJDRA=="`, `"QR=="`, `"QUJ="`,
		`"Q"`, `"QQ"`, `"QQ="`, `"QUJ"`, `"Q==="`, `"===="`, `"=QQ="`, `"QQ==QQ=="`, `"QQ=\u003d"`,
		`"QUJD\nRA=="`, `"QUJD\r\nRA=="`, `"QQ\n=="`, `"QUJD\tRA=="`, `"QUJD RA=="`, `"\u0051Q=="`, `"Q\/=="`,
		`"QUJ-"`, `"QUJ_"`, `"QUJ!"`, `"QUJ\u00e9"`, "\"QUJ\xff\"", `"é"`,
		`0`, `1`, `-1`, `true`, `false`, `{}`, `{"a":1}`,
		`[]`, `[1,2,255]`, `[256]`, `[-1]`, `[1.5]`, `[1e2]`, `[null]`, `["a"]`, `[[1]]`, `[true]`,
	} {
		refusesLikeBytes(t, data)
	}
	r := rand.New(rand.NewPCG(20, 26))
	for range 20000 {
		refusesLikeBytes(t, randomPayload(r))
	}
}

// randomPayload writes a JSON string of base64-like text: mostly valid,
// now and then with a character out of place, a group cut short, padding
// where none belongs, or an escape.
func randomPayload(r *rand.Rand) string {
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	text := base64.StdEncoding.EncodeToString(b)
	pieces := []string{"=", "==", `\n`, `\r`, `\u0041`, `\/`, "!", "-", "_", " ", "é", "A", "AA", "\xff"}
	for range r.IntN(3) {
		i := r.IntN(len(text) + 1)
		switch r.IntN(3) {
		case 0:
			text = text[:i] + pieces[r.IntN(len(pieces))] + text[i:]
		case 1:
			text = text[:i]
		default:
			if i < len(text) {
				text = text[:i] + text[i+1:]
			}
		}
	}
	return `"` + text + `"`
}

func FuzzBytes(f *testing.F) {
	r := rand.New(rand.NewPCG(20, 27))
	for range 100 {
		f.Add(randomPayload(r))
	}
	f.Add(`[1,2]`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, data string) {
		refusesLikeBytes(t, data)
	})
}

// TestPlainBase64AllocatesNothing: the form encoding/json writes is
// checked without copying it, whatever its size.
func TestPlainBase64AllocatesNothing(t *testing.T) {
	data := []byte(strconv.Quote(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("payload", 1000)))))
	var b checked.Bytes
	allocs := testing.AllocsPerRun(100, func() {
		require.NoError(t, b.UnmarshalJSON(data))
	})
	assert.Zero(t, allocs)
}
