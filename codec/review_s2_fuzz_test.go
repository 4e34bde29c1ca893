package codec_test

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-es/cairn/internal/testrig/race"
)

// rvFuzz holds the kinds the differential corner test found no difference
// on (the known differences, rvFrom, json.Number with ",string", maps keyed
// by json.Number or float, invalid tag names, are left out so that the
// fuzzer looks for new ones).
type rvFuzz struct {
	rvEmbedPtrExported
	RVShallow
	B     bool                       `json:"b,string"`
	I     int                        `json:"i,string"`
	U8    uint8                      `json:"u8,string"`
	F     float32                    `json:"f,string"`
	S     string                     `json:"s,string"`
	PI    *int                       `json:"pi,string"`
	N     json.Number                `json:"n"`
	PN    *json.Number               `json:"pn"`
	L     []json.Number              `json:"l"`
	MI    map[int]int                `json:"mi"`
	MU    map[uint8]string           `json:"mu"`
	KT    map[rvKeyText]int          `json:"kt"`
	KJ    map[rvKeyJSON]int          `json:"kj"`
	MR    map[string]json.RawMessage `json:"mr"`
	MS    map[string]RVShallow       `json:"ms"`
	Bytes []byte                     `json:"bytes"`
	RB    rvBytes                    `json:"rb"`
	PB    []rvPlainByte              `json:"pb"`
	TB    []rvByte                   `json:"tb"`
	Arr   [3]byte                    `json:"arr"`
	At    time.Time                  `json:"at"`
	PAt   *time.Time                 `json:"pat"`
	Dur   time.Duration              `json:"dur"`
	Big   *big.Int                   `json:"big"`
	Raw   json.RawMessage            `json:"raw"`
	Any   any                        `json:"any"`
	Ptr   *rvFuzz                    `json:"ptr"`
	Dash  rvDashes                   `json:"dash"`
	Greek int                        `json:"αβγ"`
	Kel   int                        `json:"\u212a"`
	Long  int                        `json:"ſ"`
}

var rvFuzzNames = []string{"b", "i", "u8", "f", "s", "pi", "n", "pn", "l", "mi", "mu", "kt", "kj", "mr", "ms", "bytes", "rb", "pb",
	"tb", "arr", "at", "pat", "dur", "big", "raw", "any", "ptr", "dash", "a_b", "a-b", "A_B", "αβγ", "ΑΒΓ", "\u212a", "k", "K",
	"ſ", "s", "S", "Y", "y", "Z", "Name", "NAME", "name", "Nam\xff", "1", "+1", "-1", "01", "256", "true", "x", ""}

var rvFuzzValues = []string{`null`, `true`, `0`, `-0`, `1`, `1.5`, `1e2`, `300`, `-1`, `18446744073709551616`, `"1"`, `"\"1\""`,
	`"true"`, `"null"`, `"x"`, `""`, `"AQID"`, `"AQ\nID"`, `"\u0041QID"`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05.5+01:00"`,
	`[]`, `[1,2]`, `[1,"a"]`, `{}`, `{"Name":"x"}`, `"\ud800"`, "\"\xff\"", ` [ 1 , 2 ] `, `"\u00e9"`}

// rvFuzzDoc writes a random document of rvFuzzNames and rvFuzzValues.
func rvFuzzDoc(r *rand.Rand, depth int) string {
	return randomDoc{names: rvFuzzNames, values: rvFuzzValues, maxDepth: 2, leafOdds: 3, arrayOdds: 4, members: 5,
		quote: func(name string) string {
			if name == "Nam\xff" {
				return "\"Nam\xff\"" // invalid UTF-8 as it is, not escaped
			}
			b, _ := json.Marshal(name)
			return string(b)
		}}.write(r, depth)
}

func rvDecodeAll(t *testing.T, data []byte) {
	t.Helper()
	d := string(data)
	t.Run("fuzz", rvDiff[rvFuzz](d))
	t.Run("map", rvDiff[map[string]rvFuzz](d))
	t.Run("slice", rvDiff[[]rvFuzz](d))
}

func TestReviewS2DecodeRandomDocs(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		d := "{" + `"ptr":` + rvFuzzDoc(r, 0) + "," + rvFuzzDoc(r, 0)[1:]
		if d[len(d)-2:] == ",]" || d[len(d)-1] != '}' {
			d = rvFuzzDoc(r, 0)
		}
		rvDecodeAll(t, []byte(d))
		rvDecodeAll(t, []byte(rvFuzzDoc(r, 0)))
		if t.Failed() {
			return
		}
	}
}

func FuzzReviewS2Decode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		f.Add([]byte(rvFuzzDoc(r, 0)))
	}
	f.Fuzz(rvDecodeAll)
}
