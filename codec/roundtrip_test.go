package codec_test

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-es/cairn/codec"
	"github.com/cairn-es/cairn/eventstore"
)

// Address is nested in Kitchen, by value, by pointer and in collections.
type Address struct {
	Street string   `json:"street"`
	Lines  []string `json:"lines,omitempty"`
}

// Audit is embedded in Kitchen.
type Audit struct {
	By string `json:"by"`
}

// Kitchen holds every kind of field a user would put in an event.
type Kitchen struct {
	Audit
	ID        uuid.UUID          `json:"id"`
	At        time.Time          `json:"at"`
	Due       *time.Time         `json:"due"`
	Name      string             `json:"name"`
	Flag      bool               `json:"flag"`
	Count     int                `json:"count"`
	Small     int8               `json:"small"`
	Unsigned  uint64             `json:"unsigned"`
	Ratio     float64            `json:"ratio"`
	BigString int64              `json:"big_string,string"` // beyond 2^53: as a JSON string
	Huge      *big.Int           `json:"huge"`
	Decimal   string             `json:"decimal"` // big numbers as strings
	Home      Address            `json:"home"`
	Work      *Address           `json:"work"`
	Previous  []Address          `json:"previous"`
	Tags      []string           `json:"tags"`
	Fixed     [3]int             `json:"fixed"`
	Scores    map[string]int     `json:"scores"`
	ByNumber  map[int]string     `json:"by_number"`
	Nested    map[string][]int   `json:"nested"`
	Maybe     *int               `json:"maybe"`
	Blob      []byte             `json:"blob"`
	Raw       json.RawMessage    `json:"raw"`
	Extra     map[string]Address `json:"extra"`
}

func kitchenRegistry(t testing.TB) *codec.Registry {
	reg := codec.NewRegistry(codec.Options{})
	require.NoError(t, codec.Register[Kitchen](reg, "test.kitchen", 1))
	require.NoError(t, reg.Validate())
	return reg
}

func roundTrip[T any](t testing.TB, reg *codec.Registry, v T) T {
	t.Helper()
	data, err := reg.Encode(v)
	require.NoError(t, err)
	got, err := reg.Decode(stored(data, "kitchen-1", 0))
	require.NoError(t, err)
	require.Len(t, got, 1)
	out, ok := got[0].Value.(T)
	require.True(t, ok, "decoded %T", got[0].Value)
	return out
}

func TestRoundTripEveryKind(t *testing.T) {
	reg := kitchenRegistry(t)
	due := time.Date(2027, 1, 2, 3, 4, 5, 6, time.UTC)
	maybe := 7
	huge, ok := new(big.Int).SetString("123456789012345678901234567890", 10)
	require.True(t, ok)
	v := Kitchen{
		Audit:     Audit{By: "ops"},
		ID:        uuid.MustParse("0193a1b2-0000-7000-8000-000000000001"),
		At:        time.Date(2026, 11, 29, 15, 30, 0, 123456789, time.UTC),
		Due:       &due,
		Name:      "Zoë — 東京 🚀",
		Flag:      true,
		Count:     -42,
		Small:     math.MinInt8,
		Unsigned:  math.MaxUint64,
		Ratio:     0.1 + 0.2,
		BigString: math.MaxInt64,
		Huge:      huge,
		Decimal:   "98765432109876543210.000000001",
		Home:      Address{Street: "1 Main St", Lines: []string{"flat 2"}},
		Work:      &Address{Street: "2 Side St"},
		Previous:  []Address{{Street: "a"}, {Street: "b", Lines: []string{"x", "y"}}},
		Tags:      []string{},
		Fixed:     [3]int{1, 2, 3},
		Scores:    map[string]int{"a": 1, "": 0},
		ByNumber:  map[int]string{-1: "minus one", 10: "ten"},
		Nested:    map[string][]int{"empty": {}, "full": {1, 2}},
		Maybe:     &maybe,
		Blob:      []byte{0, 1, 2, 0xff},
		Raw:       json.RawMessage(`{"kept":[1,"as",true,null]}`),
		Extra:     map[string]Address{"k": {Street: "s"}},
	}
	assert.Equal(t, v, roundTrip(t, reg, v))

	// Nil pointers, nil maps and nil slices come back nil.
	var zero Kitchen
	zero.Raw = json.RawMessage(`null`) // a nil RawMessage encodes as null and decodes as this
	assert.Equal(t, zero, roundTrip(t, reg, zero))

	// A time in another zone keeps its instant and offset.
	zoned := Kitchen{At: time.Date(2026, 6, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600)), Raw: json.RawMessage(`1`)}
	got := roundTrip(t, reg, zoned)
	assert.True(t, zoned.At.Equal(got.At))
	_, offset := got.At.Zone()
	assert.Equal(t, 2*3600, offset)
}

func TestRoundTripStripsMonotonicClock(t *testing.T) {
	reg := kitchenRegistry(t)
	now := time.Now()
	got := roundTrip(t, reg, Kitchen{At: now, Raw: json.RawMessage(`0`)})
	assert.True(t, now.Equal(got.At))
}

// TestRoundTripProperty checks decode(encode(x)) == x for random values.
func TestRoundTripProperty(t *testing.T) {
	reg := kitchenRegistry(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		v := randomKitchen(rng)
		require.Equal(t, v, roundTrip(t, reg, v), "value %d", i)
	}
}

func randomKitchen(r *rand.Rand) Kitchen {
	str := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			switch r.IntN(4) {
			case 0:
				b.WriteRune(rune(r.IntN(0x80)))
			case 1:
				b.WriteRune(rune(0x80 + r.IntN(0xD800-0x80)))
			case 2:
				b.WriteRune(rune(0xE000 + r.IntN(0x10FFFF-0xE000)))
			default:
				b.WriteString(`"\<>&` + "\u2028")
			}
		}
		return b.String()
	}
	maybe := func() bool { return r.IntN(3) == 0 }
	var v Kitchen
	v.By = str()
	v.ID = uuid.UUID(func() (b [16]byte) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}())
	v.At = time.Unix(0, r.Int64()).UTC()
	if maybe() {
		due := time.Unix(r.Int64N(253402300800+62135596800)-62135596800, r.Int64N(1e9)).UTC() // years 1 to 9999, what JSON allows
		v.Due = &due
	}
	v.Name, v.Flag, v.Count, v.Small = str(), maybe(), int(r.Int64()), int8(r.Uint32())
	v.Unsigned, v.Ratio, v.BigString = r.Uint64(), r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)), r.Int64()
	if maybe() {
		v.Huge = new(big.Int).Lsh(big.NewInt(r.Int64()), uint(r.IntN(200)))
	}
	v.Decimal = big.NewInt(r.Int64()).String()
	addr := func() Address {
		a := Address{Street: str()}
		for range r.IntN(3) {
			a.Lines = append(a.Lines, str())
		}
		return a
	}
	v.Home = addr()
	if maybe() {
		a := addr()
		v.Work = &a
	}
	if maybe() {
		v.Previous = []Address{}
	}
	for range r.IntN(3) {
		v.Previous = append(v.Previous, addr())
	}
	for range r.IntN(4) {
		v.Tags = append(v.Tags, str())
	}
	v.Fixed = [3]int{int(r.Int32()), 0, -1}
	if maybe() {
		v.Scores = map[string]int{}
		for range r.IntN(4) {
			v.Scores[str()] = int(r.Int32())
		}
	}
	if maybe() {
		v.ByNumber = map[int]string{int(r.Int64()): str()}
		v.Nested = map[string][]int{str(): {int(r.Int32())}, "": {}}
		v.Extra = map[string]Address{str(): addr()}
	}
	if maybe() {
		n := int(r.Int64())
		v.Maybe = &n
	}
	if maybe() {
		v.Blob = make([]byte, r.IntN(20))
		for i := range v.Blob {
			v.Blob[i] = byte(r.Uint32())
		}
	}
	raws := []string{`null`, `0`, `"s"`, `[1,2,{"a":null}]`, `{"nested":{"deep":[true,false]}}`}
	v.Raw = json.RawMessage(raws[r.IntN(len(raws))])
	return v
}

func TestRoundTripAtEveryStreamPlace(t *testing.T) {
	reg := newRegistry(t)
	data, err := reg.Encode(OrderPlaced{OrderID: "o", Seats: 1})
	require.NoError(t, err)
	for _, version := range []uint64{0, 1, math.MaxUint64 - 1} {
		ev := stored(data, "order-o", version)
		ev.Position = eventstore.Position{Major: math.MaxUint64, Minor: version}
		got, err := reg.Decode(ev)
		require.NoError(t, err)
		assert.Equal(t, ev, got[0].Event)
	}
}
