//lint:file-ignore SA5008 the struct tags encoding/json finds odd are what these tests decode

package codec_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-es/cairn/eventstore"
	"github.com/cairn-es/cairn/internal/checked"
	"github.com/cairn-es/cairn/internal/testrig/race"
)

// A type whose decoding calls no method but those of the pure decoders
// (time.Time, json.RawMessage, uuid.UUID, eventstore.Position,
// checked.Bytes) decodes a new value with v2's error reporting first (see
// jsonDecoding): the methods may then run on documents that encoding/json
// refuses before calling any, and twice on those the first pass refuses.
// These tests hold such types to encoding/json on documents that put event
// IDs, positions and checked bytes everywhere a type can hold them, well
// formed or not.

// withIDs holds event IDs and positions in every place: a field, a
// pointer, a slice, a map's values and keys, under the `string` option,
// and in a nested value.
type withIDs struct {
	ID     uuid.UUID                   `json:"id"`
	PID    *uuid.UUID                  `json:"pid"`
	IDs    []uuid.UUID                 `json:"ids"`
	ByID   map[uuid.UUID]int           `json:"by_id"`
	IDS    uuid.UUID                   `json:"ids_s,string"`
	Pos    eventstore.Position         `json:"pos"`
	PPos   *eventstore.Position        `json:"ppos"`
	ByPos  map[eventstore.Position]int `json:"by_pos"`
	PosS   eventstore.Position         `json:"pos_s,string"`
	ToID   map[string]uuid.UUID        `json:"to_id"`
	N      int                         `json:"n"`
	Nested *withIDs                    `json:"nested"`
}

var (
	idNames  = []string{"id", "ID", "pid", "ids", "by_id", "ids_s", "pos", "Pos", "ppos", "by_pos", "pos_s", "to_id", "n", "nested", "zz"}
	idValues = []string{
		`null`, `0`, `true`, `""`, `"x"`, `[]`, `{}`, `[1]`,
		`"0193a1b2-0000-7000-8000-000000000001"`,           // an event ID
		`"0193A1B2-0000-7000-8000-00000000000F"`,           // upper case
		`"urn:uuid:0193a1b2-0000-7000-8000-000000000001"`,  // the URN form
		`"{0193a1b2-0000-7000-8000-000000000001}"`,         // braces
		`"0193a1b200007000800000000000000f"`,               // no dashes
		`"0193a1b2-0000-7000-8000-00000000000g"`,           // not hex
		`"0193a1b2+0000-7000-8000-000000000001"`,           // a dash missing
		`"0193a1b2-0000-7000-8000-0000000000\u0030\u0031"`, // escaped digits
		`"\"0193a1b2-0000-7000-8000-000000000001\""`,       // quoted inside
		`"12:34"`, `"0:0"`, `"18446744073709551615:1"`, `"18446744073709551616:1"`, `"1:"`, `":1"`, `"1:2:3"`, `" 1:2"`,
		`"1\u003a2"`, `"\"1:2\""`, `"\ud800"`, "\"\xff\"",
		`{"0193a1b2-0000-7000-8000-000000000001":1}`, `{"x":1}`, `{"1:2":3}`, `{"1:x":3}`,
		`["0193a1b2-0000-7000-8000-000000000001"]`, `["0193a1b2-0000-7000-8000-000000000001",null,"x"]`,
	}
)

func idDoc(r *rand.Rand) string {
	return randomDoc{names: idNames, values: idValues, maxDepth: 2, leafOdds: 3, arrayOdds: 6, members: 6, quote: strconv.Quote}.write(r, 0)
}

// TestPureDecodersDecodeLikeEncodingJSON decodes random documents of IDs
// and positions, whole and broken (cut short or trailed by garbage: syntax
// that encoding/json refuses before calling any method), into withIDs, a
// slice and a map of it (fixed seed).
func TestPureDecodersDecodeLikeEncodingJSON(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	randomDocsDecodeLikeEncodingJSON[withIDs](t, 6000, 28, idDoc)
}

// randomDocsDecodeLikeEncodingJSON decodes n random documents of doc's,
// whole and broken, into T, a slice and a map of it, from a fixed seed;
// a tenth of them under -short.
func randomDocsDecodeLikeEncodingJSON[T any](t *testing.T, n int, seed uint64, doc func(*rand.Rand) string) {
	t.Helper()
	if testing.Short() {
		n /= 10
	}
	r := rand.New(rand.NewPCG(10, seed))
	for range n {
		for _, data := range broken(r, doc(r)) {
			decodesLikeEncodingJSON[T](t, []byte(data))
			decodesLikeEncodingJSON[[]T](t, []byte(data))
			decodesLikeEncodingJSON[map[string]T](t, []byte(data))
		}
	}
}

func FuzzPureDecoders(f *testing.F) {
	r := rand.New(rand.NewPCG(10, 29))
	for range 200 {
		f.Add([]byte(idDoc(r)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decodesLikeEncodingJSON[withIDs](t, data)
		decodesLikeEncodingJSON[map[string]withIDs](t, data)
	})
}

// withPayloads holds checked bytes (what a view of a saga record decodes
// in place of a payload it checks and drops) in every place: a field, a
// pointer, a slice, a map's values, a nested value, and a field that
// shadows an embedded struct's []byte of the same name, as such a view
// shadows the record it embeds.
type withPayloads struct {
	D      checked.Bytes            `json:"d"`
	PD     *checked.Bytes           `json:"pd"`
	Ds     []checked.Bytes          `json:"ds"`
	ByName map[string]checked.Bytes `json:"by_name"`
	payloadShadowed
	Shadow checked.Bytes `json:"shadow"`
	Nested *withPayloads `json:"nested"`
}

type payloadShadowed struct {
	Shadow []byte `json:"shadow"`
	Kept   []byte `json:"kept"`
}

var (
	payloadNames  = []string{"d", "D", "pd", "ds", "by_name", "shadow", "SHADOW", "kept", "nested", "zz"}
	payloadValues = []string{
		`null`, `0`, `true`, `""`, `[]`, `{}`, `[1,255]`, `[256]`, `[-1]`, `[null]`, `["a"]`,
		`"AQID"`, `"AQ=="`, `"AQI="`, `"AQ"`, `"AQ="`, `"A==="`, `"===="`, `"AQ==AQ=="`, `"AQ\r\n=="`, `"AQ\n=="`, `"A\/Q="`,
		`"AQ=\u003d"`, `"\u0041Q=="`, `"-_8="`, `"AQ== "`, `"AQ!="`, "\"AQ\xff=\"", `"\ud800"`,
	}
)

func payloadDoc(r *rand.Rand) string {
	return randomDoc{names: payloadNames, values: payloadValues, maxDepth: 2, leafOdds: 3, arrayOdds: 6, members: 6, quote: strconv.Quote}.write(r, 0)
}

// TestPureDecodersCheckedBytes decodes random documents of payloads,
// whole and broken, into withPayloads, a slice and a map of it (fixed
// seed): checked bytes take the fresh path as the other pure decoders do.
func TestPureDecodersCheckedBytes(t *testing.T) {
	race.Outside(t) // thousands of decodes from one goroutine
	randomDocsDecodeLikeEncodingJSON[withPayloads](t, 4000, 30, payloadDoc)
}
